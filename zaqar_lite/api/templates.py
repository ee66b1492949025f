"""Queue templates (an admin extension): ``/v2/queue_templates`` and ``/v2/queue_templates/{name}``."""

from __future__ import annotations

from typing import Any

import falcon

from zaqar_lite.api import schemas
from zaqar_lite.api.bodies import read_json
from zaqar_lite.api.middleware import require_operator
from zaqar_lite.api.resource import ResourceBase
from zaqar_lite.config import Settings
from zaqar_lite.models import QueueTemplate
from zaqar_lite.service.templates import QueueTemplates

COLLECTION = "/v2/queue_templates"


def represent(template: QueueTemplate) -> dict[str, Any]:
    """Return a template's representation."""
    return {"name": template.name, "href": f"{COLLECTION}/{template.name}", "pattern": template.pattern,
            "metadata": template.metadata, "source": template.source}


class TemplateResource(ResourceBase):
    """A resource over the queue templates (admin only)."""

    def __init__(self, settings: Settings, templates: QueueTemplates) -> None:
        super().__init__(settings)
        self.templates = templates


class TemplateCollection(TemplateResource):
    """``GET /v2/queue_templates``: every template, those of the configuration file included."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """List the templates by name (admin)."""
        require_operator(req, self.settings)
        resp.media = {"queue_templates": [represent(t) for t in self.templates.all()]}


class TemplateItem(TemplateResource):
    """``/v2/queue_templates/{name}``: define or replace, read, remove (admin)."""

    def on_put(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        """Define (201) or replace (204) a template kept in the store."""
        require_operator(req, self.settings)
        document, _ = read_json(req, self.limits.max_queue_metadata)
        pattern, metadata = schemas.queue_template(document)
        if self.templates.put(name, pattern, metadata):
            resp.status = falcon.HTTP_201
            resp.location = f"{COLLECTION}/{name}"
        else:
            resp.status = falcon.HTTP_204

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        """Return one template."""
        require_operator(req, self.settings)
        resp.media = represent(self.templates.get(name))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        """Remove a template (idempotent); queues created from it keep their metadata."""
        require_operator(req, self.settings)
        self.templates.delete(name)
        resp.status = falcon.HTTP_204
