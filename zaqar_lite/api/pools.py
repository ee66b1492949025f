"""Pools and flavors (admin): ``/v2/pools``, ``/v2/flavors`` and their items, with Zaqar's bodies."""

from __future__ import annotations

from typing import Any

import falcon

from zaqar_lite import errors
from zaqar_lite.api import inputs, schemas
from zaqar_lite.api.bodies import next_links, read_json
from zaqar_lite.api.middleware import require_operator
from zaqar_lite.api.resource import ResourceBase
from zaqar_lite.config import Settings
from zaqar_lite.models import Pool
from zaqar_lite.rules.pools import masked_uri
from zaqar_lite.service.pools import Flavor, PoolAdmin

POOLS = "/v2/pools"
FLAVORS = "/v2/flavors"
#: the largest ``limit`` of a pool or flavor listing, and the default (Zaqar's)
MAX_PAGE, DEFAULT_PAGE = 20, 10
#: the largest pool or flavor body
MAX_BODY = 65536


def show_pool(pool: Pool, detailed: bool) -> dict[str, Any]:
    """Return a pool's representation (``options`` only when detailed, as Zaqar), its URI masked."""
    shown: dict[str, Any] = {"name": pool.name, "uri": masked_uri(pool.uri), "weight": pool.weight,
                             "flavor": pool.flavor, "href": f"{POOLS}/{pool.name}"}
    if detailed:
        shown["options"] = dict(pool.options)
    return shown


def show_flavor(flavor: Flavor, detailed: bool = True) -> dict[str, Any]:
    """Return a flavor's representation (``capabilities`` only when detailed in a listing)."""
    shown: dict[str, Any] = {"name": flavor.name, "pool_list": flavor.pool_list,
                             "href": f"{FLAVORS}/{flavor.name}"}
    if detailed:
        shown["capabilities"] = flavor.capabilities
    return shown


class AdminResource(ResourceBase):
    """A resource of the pool administration: admin role, and pools enabled."""

    def __init__(self, settings: Settings, pools: PoolAdmin | None) -> None:
        """``pools`` is None when ``[pools] enabled`` is off: every responder answers 404."""
        super().__init__(settings)
        self.pools = pools

    def admin(self, req: falcon.Request) -> PoolAdmin:
        """Return the administration, refusing non-admins and noauth callers (403), and a server
        without pools (404)."""
        require_operator(req, self.settings)
        if self.pools is None:
            raise errors.NotFound("Pools are not enabled on this server ([pools] enabled = false).")
        return self.pools

    @staticmethod
    def page(req: falcon.Request) -> tuple[str | None, int, bool]:
        """Return a listing's ``marker``, ``limit`` and ``detailed``."""
        limit = inputs.page_limit(req.get_param("limit"), MAX_PAGE, DEFAULT_PAGE)
        return req.get_param("marker"), limit, inputs.boolean(req.get_param("detailed"), "detailed")


class PoolCollection(AdminResource):
    """``GET /v2/pools``: the pools by name, a page at a time."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """List pools (admin)."""
        admin = self.admin(req)
        marker, limit, detailed = self.page(req)
        pools = [show_pool(p, detailed) for p in admin.list_pools(marker, limit)]
        query = {"marker": pools[-1]["name"], "limit": str(limit),
                 **({"detailed": "true"} if detailed else {})} if pools else {}
        resp.media = {"pools": pools, "links": next_links(POOLS, query) if pools else []}


class PoolItem(AdminResource):
    """``/v2/pools/{pool}``: register or replace, read, change, remove (admin)."""

    def on_put(self, req: falcon.Request, resp: falcon.Response, pool: str) -> None:
        """Register (201) or replace (204) a pool."""
        admin = self.admin(req)
        fields = schemas.pool_body(read_json(req, MAX_BODY)[0], whole=True)
        created = admin.put_pool(pool, fields["uri"], fields["weight"], fields.get("flavor", ""),
                                 fields.get("options", {}))
        resp.status = falcon.HTTP_201 if created else falcon.HTTP_204
        if created:
            resp.location = f"{POOLS}/{pool}"

    def on_get(self, req: falcon.Request, resp: falcon.Response, pool: str) -> None:
        """Return a pool (``options`` with ``detailed=true``)."""
        admin = self.admin(req)
        resp.media = show_pool(admin.get_pool(pool), inputs.boolean(req.get_param("detailed"), "detailed"))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, pool: str) -> None:
        """Change some of ``uri``, ``weight``, ``flavor``, ``options``; answer the pool."""
        admin = self.admin(req)
        fields = schemas.pool_body(read_json(req, MAX_BODY)[0], whole=False)
        resp.media = show_pool(admin.patch_pool(pool, fields), False)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, pool: str) -> None:
        """Remove a pool that holds no queue (409 otherwise)."""
        self.admin(req).delete_pool(pool)
        resp.status = falcon.HTTP_204


class FlavorCollection(AdminResource):
    """``GET /v2/flavors``: the flavors by name, a page at a time."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """List flavors (admin)."""
        admin = self.admin(req)
        marker, limit, detailed = self.page(req)
        flavors = [show_flavor(f, detailed) for f in admin.list_flavors(marker, limit)]
        query = {"marker": flavors[-1]["name"], "limit": str(limit),
                 **({"detailed": "true"} if detailed else {})} if flavors else {}
        resp.media = {"flavors": flavors, "links": next_links(FLAVORS, query) if flavors else []}


class FlavorItem(AdminResource):
    """``/v2/flavors/{flavor}``: create, read, change its pools, remove (admin)."""

    def on_put(self, req: falcon.Request, resp: falcon.Response, flavor: str) -> None:
        """Create a flavor of the pools listed (201), or give an existing one those pools (204)."""
        admin = self.admin(req)
        created = admin.put_flavor(flavor, schemas.flavor_pools(read_json(req, MAX_BODY)[0]))
        resp.status = falcon.HTTP_201 if created else falcon.HTTP_204
        if created:
            resp.location = f"{FLAVORS}/{flavor}"

    def on_get(self, req: falcon.Request, resp: falcon.Response, flavor: str) -> None:
        """Return a flavor with its pools and capabilities."""
        resp.media = show_flavor(self.admin(req).get_flavor(flavor))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, flavor: str) -> None:
        """Give a flavor the pools of ``pool_list``; answer the flavor."""
        admin = self.admin(req)
        pool_list = schemas.flavor_pools(read_json(req, MAX_BODY)[0])
        resp.media = show_flavor(admin.patch_flavor(flavor, pool_list))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, flavor: str) -> None:
        """Remove a flavor; its pools stay, in no flavor."""
        self.admin(req).delete_flavor(flavor)
        resp.status = falcon.HTTP_204
