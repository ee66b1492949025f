"""The WSGI application: the composition root where every service is built once, routes,
middleware and error handlers, wired in one place."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeAlias

import falcon

from zaqar_lite import errors
from zaqar_lite import metrics as counted
from zaqar_lite.api import (
    claims,
    console,
    health,
    messages,
    pools,
    queues,
    redrive,
    share,
    subscriptions,
    templates,
    topics,
    versions,
)
from zaqar_lite.api import errors as api_errors
from zaqar_lite.api import metrics as metrics_api
from zaqar_lite.api.middleware import QueueNameCheck, RequestContext, no_sessions
from zaqar_lite.api.sqs import resource as sqs
from zaqar_lite.api.sqs.actions import SqsActions
from zaqar_lite.clock import Clock, wall_clock
from zaqar_lite.config import Settings
from zaqar_lite.jsontext import utf8_text
from zaqar_lite.service import Messaging
from zaqar_lite.service.pools import PoolAdmin
from zaqar_lite.service.subscriptions import Subscriptions
from zaqar_lite.service.templates import QueueTemplates
from zaqar_lite.service.topics import Topics
from zaqar_lite.service.waiting.channels import InProcessChannel
from zaqar_lite.service.waiting.long_poll import LongPoll
from zaqar_lite.service.waiting.room import WaitingRoom
from zaqar_lite.storage import open_deployment
from zaqar_lite.storage.base import Storage
from zaqar_lite.storage.encrypted import encrypted
from zaqar_lite.storage.pools.router import PooledStorage

#: the application falcon builds: WSGI requests and responses
WsgiApp: TypeAlias = falcon.App[falcon.Request, falcon.Response]


@dataclasses.dataclass(frozen=True)
class Services:
    """Every service a request reaches, each built once (:func:`build_services`) for one app."""

    settings: Settings
    clock: Clock
    #: the store's driver name (``sqlite``, ``redis``, ..., ``pools``): labels and the health document
    store_name: str
    messaging: Messaging
    templates: QueueTemplates
    topics: Topics
    subscriptions: Subscriptions
    #: the pool administration; None unless ``[pools] enabled``
    pools: PoolAdmin | None
    #: the claims' loop, waiting claims included
    long_poll: LongPoll
    #: the SQS face's ``/`` and queue-URL sink over these services; None unless ``[sqs] enabled``
    sqs_root: sqs.RootEndpoint | None = None
    sqs_queues: sqs.QueueEndpoint | None = None


def build_services(settings: Settings, storage: Storage, clock: Clock = wall_clock, *,
                   messaging: Messaging | None = None, templates: QueueTemplates | None = None,
                   long_poll: LongPoll | None = None) -> Services:
    """Build every service of one app over one deployment's store.

    Args:
        settings: the loaded settings.
        storage: the deployment's store (``open_deployment``): one driver, or the pools' router.
        clock: the time source of every service (tests pass a manual clock).
        messaging: the messaging service over ``storage`` built by the gevent
            worker (``server.worker_app``: woken across workers, maybe run off
            the event loop); built here by default.
        templates: the queue templates ``messaging`` creates queues from, when
            it is handed in; built here by default.
        long_poll: the claims' loop fed by the worker's channel; by default
            :func:`in_process_long_poll`.
    """
    if messaging is not None and templates is None:
        raise ValueError("a messaging service handed in comes with the queue templates it creates "
                         "queues from")
    # the deployment seen through encryption at rest, as the messaging service sees it
    store = encrypted(storage, settings)
    templates = templates if templates is not None else QueueTemplates(storage, settings)
    messaging = messaging if messaging is not None else Messaging(store, settings, clock, templates=templates)
    long_poll = long_poll if long_poll is not None else in_process_long_poll(messaging)
    sqs_root, sqs_queues = sqs.endpoints(settings, SqsActions(settings, messaging, long_poll, clock), clock) \
        if settings.sqs.enabled else (None, None)
    return Services(
        settings=settings, clock=clock, store_name=storage.name, messaging=messaging, templates=templates,
        topics=Topics(messaging), subscriptions=Subscriptions(store, settings, clock),
        pools=pool_admin(settings, storage, clock), long_poll=long_poll, sqs_root=sqs_root,
        sqs_queues=sqs_queues)


def pool_admin(settings: Settings, storage: Storage, clock: Clock) -> PoolAdmin | None:
    """Return the pool administration of a deployment with pools, or None when ``[pools] enabled`` is off.

    Raises:
        TypeError: pools are enabled but ``storage`` is not the pools' router
            (``open_deployment`` opens it with ``[pools] enabled``).
    """
    if not settings.pools.enabled:
        return None
    if not isinstance(storage, PooledStorage):
        raise TypeError(f"[pools] enabled needs the pools' router as the deployment's store, "
                        f"not {type(storage).__name__} (open it with open_deployment)")
    return PoolAdmin(storage, clock, settings.storage_uri, settings.pools)


def in_process_long_poll(messaging: Messaging) -> LongPoll:
    """Return long polling whose wake-ups come from this service only (one process, no channel)."""
    room, channel = WaitingRoom(), InProcessChannel()
    channel.listen(room)
    messaging.wake_ups_through(channel)
    return LongPoll(messaging, room)


def routes(services: Services) -> list[tuple[str, object]]:
    """Return the route table: every URI template with its resource, each handed the services it uses."""
    settings, clock, messaging = services.settings, services.clock, services.messaging
    subs, admin, long_poll = services.subscriptions, services.pools, services.long_poll
    q = "/v2/queues/{queue}"
    sub = q + "/subscriptions/{subscription_id}"
    root: object = services.sqs_root if services.sqs_root is not None else versions.VersionsResource()
    return [
        ("/", root),
        ("/v2", versions.HomeResource()),
        ("/v2/ping", health.Ping(messaging)),
        ("/v2/health", health.Health(messaging, admin, services.store_name)),
        ("/v2/queues", queues.QueueCollection(messaging)),
        (q, queues.QueueItem(messaging)),
        (q + "/stats", queues.QueueStatsResource(messaging)),
        (q + "/purge", queues.QueuePurge(messaging)),
        (q + "/share", share.QueueShare(settings, clock)),
        (q + "/redrive", redrive.QueueRedrive(messaging)),
        (q + "/redrive/tasks", redrive.RedriveTaskCollection(messaging)),
        (q + "/redrive/tasks/{task_id}", redrive.RedriveTaskItem(messaging)),
        (q + "/redrive/tasks/{task_id}/cancel", redrive.RedriveTaskCancel(messaging)),
        (q + "/messages", messages.MessageCollection(messaging)),
        (q + "/messages/{message_id}", messages.MessageItem(messaging)),
        (q + "/messages/{message_id}/release", messages.MessageRelease(messaging)),
        (q + "/claims", claims.ClaimCollection(settings, long_poll)),
        (q + "/claims/{claim_id}", claims.ClaimItem(messaging)),
        (q + "/subscriptions", subscriptions.SubscriptionCollection(settings, subs, clock)),
        (sub, subscriptions.SubscriptionItem(settings, subs, clock)),
        (sub + "/confirm", subscriptions.SubscriptionConfirm(settings, subs, clock)),
        (sub + "/resume", subscriptions.SubscriptionResume(settings, subs, clock)),
        ("/v2/subscriptions/resume", subscriptions.SubscriberResume(settings, subs, clock)),
        *topics.routes(settings, services.topics, subs, clock),
        (templates.COLLECTION, templates.TemplateCollection(settings, services.templates)),
        (templates.COLLECTION + "/{name}", templates.TemplateItem(settings, services.templates)),
        ("/v2/redrive/tasks", redrive.ProjectRedriveTasks(messaging)),
        (pools.POOLS, pools.PoolCollection(settings, admin)),
        (pools.POOLS + "/{pool}", pools.PoolItem(settings, admin)),
        (pools.FLAVORS, pools.FlavorCollection(settings, admin)),
        (pools.FLAVORS + "/{flavor}", pools.FlavorItem(settings, admin)),
        *([("/metrics", metrics_api.Metrics(
            settings, metrics_api.scrape_registry(messaging, settings, services.store_name)))]
          if settings.metrics.enabled else []),
    ]


#: falcon's JSON handler writing falcon's default text (``json.dumps(..., ensure_ascii=False)``) from one
#: encoder per process (falcon's own builds an encoder per answer)
RESPONSE_JSON = falcon.media.JSONHandler(dumps=utf8_text)


def create_app(settings: Settings, storage: Storage | None = None, clock: Clock = wall_clock, *,
               messaging: Messaging | None = None, templates: QueueTemplates | None = None,
               long_poll: LongPoll | None = None) -> WsgiApp:
    """Build the falcon application: every service once (:func:`build_services`), handed to its resources.

    Every request passes the header and credential checks and then the
    queue-name check (``api/middleware.py``) before its responder runs. The
    operators' console (``api/console/``, HTML, not the v2 API) is added when
    ``[console] enabled``.

    Args:
        settings: the loaded settings.
        storage: a store to use instead of opening ``settings.storage_uri``
            (``open_deployment``).
        clock: the time source (tests pass a manual clock).
        messaging, templates, long_poll: the pieces the gevent worker built
            over ``storage`` (``server.worker_app``), as :func:`build_services` takes them.
    """
    services = build_services(settings, storage or open_deployment(settings), clock,
                              messaging=messaging, templates=templates, long_poll=long_poll)
    messaging = services.messaging
    sessions = messaging.console_session_token if settings.console_enabled else no_sessions
    middleware: list[Any] = [RequestContext(settings, clock, sessions), QueueNameCheck(settings.limits)]
    if settings.metrics.enabled:  # first: requests the checks refuse are counted too
        middleware.insert(0, metrics_api.RequestMetrics(services.store_name))
        counted.initialise_series(services.store_name)
    if settings.console_enabled:
        middleware.append(console.ConsolePages())
    app: WsgiApp = falcon.App(middleware=middleware)
    app.resp_options.media_handlers[falcon.MEDIA_JSON] = RESPONSE_JSON
    app.req_options.auto_parse_form_urlencoded = False
    app.req_options.strip_url_path_trailing_slash = True
    app.req_options.keep_blank_qs_values = False
    for template, resource in routes(services):
        app.add_route(template, resource)
    for template, page in console.routes(messaging) if settings.console_enabled else []:
        app.add_route(template, page)
    if services.sqs_queues is not None:  # tried only when no route matches
        app.add_sink(services.sqs_queues, sqs.QUEUE_URL)
    app.add_error_handler(Exception, api_errors.handle_unexpected)
    app.add_error_handler(falcon.HTTPError, api_errors.handle_http_error)
    app.add_error_handler(errors.ZaqarLiteError, api_errors.handle_domain_error)
    return app
