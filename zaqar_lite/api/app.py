"""The WSGI application: routes, middleware and error handlers, wired in one place."""

from __future__ import annotations

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
from zaqar_lite.clock import Clock, wall_clock
from zaqar_lite.config import Settings
from zaqar_lite.service import Messaging
from zaqar_lite.service.subscriptions import Subscriptions
from zaqar_lite.service.waiting.channels import InProcessChannel
from zaqar_lite.service.waiting.long_poll import LongPoll
from zaqar_lite.service.waiting.room import WaitingRoom
from zaqar_lite.storage import open_deployment
from zaqar_lite.storage.base import Storage

#: the application falcon builds: WSGI requests and responses
WsgiApp: TypeAlias = falcon.App[falcon.Request, falcon.Response]


def routes(messaging: Messaging, subs: Subscriptions | None = None,
           long_poll: LongPoll | None = None) -> list[tuple[str, object]]:
    """Return the route table: every URI template with its resource.

    Args:
        messaging: the messaging service every resource calls.
        subs: the subscription service of the subscription resources (by default
            one over the messaging service's store, settings and clock).
        long_poll: the waiting claims' loop (by default :func:`in_process_long_poll`).
    """
    subs = subs or subscription_service(messaging)
    long_poll = long_poll or in_process_long_poll(messaging)
    q = "/v2/queues/{queue}"
    return [
        ("/", versions.VersionsResource()),
        ("/v2", versions.HomeResource()),
        ("/v2/ping", health.Ping(messaging)),
        ("/v2/health", health.Health(messaging)),
        ("/v2/queues", queues.QueueCollection(messaging)),
        (q, queues.QueueItem(messaging)),
        (q + "/stats", queues.QueueStatsResource(messaging)),
        (q + "/purge", queues.QueuePurge(messaging)),
        (q + "/share", share.QueueShare(messaging)),
        (q + "/redrive", redrive.QueueRedrive(messaging)),
        (q + "/redrive/tasks", redrive.RedriveTaskCollection(messaging)),
        (q + "/redrive/tasks/{task_id}", redrive.RedriveTaskItem(messaging)),
        (q + "/redrive/tasks/{task_id}/cancel", redrive.RedriveTaskCancel(messaging)),
        (q + "/messages", messages.MessageCollection(messaging)),
        (q + "/messages/{message_id}", messages.MessageItem(messaging)),
        (q + "/messages/{message_id}/release", messages.MessageRelease(messaging)),
        (q + "/claims", claims.ClaimCollection(messaging, long_poll)),
        (q + "/claims/{claim_id}", claims.ClaimItem(messaging)),
        (q + "/subscriptions", subscriptions.SubscriptionCollection(messaging, subs)),
        (q + "/subscriptions/{subscription_id}", subscriptions.SubscriptionItem(messaging, subs)),
        (q + "/subscriptions/{subscription_id}/confirm", subscriptions.SubscriptionConfirm(messaging, subs)),
        (q + "/subscriptions/{subscription_id}/resume", subscriptions.SubscriptionResume(messaging, subs)),
        ("/v2/subscriptions/resume", subscriptions.SubscriberResume(messaging, subs)),
        *topics.routes(messaging, subs),
        (templates.COLLECTION, templates.TemplateCollection(messaging)),
        (templates.COLLECTION + "/{name}", templates.TemplateItem(messaging)),
        ("/v2/redrive/tasks", redrive.ProjectRedriveTasks(messaging)),
        (pools.POOLS, pools.PoolCollection(messaging)),
        (pools.POOLS + "/{pool}", pools.PoolItem(messaging)),
        (pools.FLAVORS, pools.FlavorCollection(messaging)),
        (pools.FLAVORS + "/{flavor}", pools.FlavorItem(messaging)),
        *([("/metrics", metrics_api.Metrics(messaging))] if messaging.settings.metrics.enabled else []),
    ]


def create_app(settings: Settings, storage: Storage | None = None,
               clock: Clock = wall_clock) -> WsgiApp:
    """Build the falcon application.

    Args:
        settings: the loaded settings.
        storage: a driver to use instead of opening ``settings.storage_uri``.
        clock: the time source (tests pass a manual clock).
    """
    storage = storage or open_deployment(settings)
    return make_app(Messaging(storage, settings, clock))


def subscription_service(messaging: Messaging) -> Subscriptions:
    """Return the subscription service over the messaging service's store, settings and clock."""
    return Subscriptions(messaging.storage, messaging.settings, messaging.clock)


def in_process_long_poll(messaging: Messaging) -> LongPoll:
    """Return long polling whose wake-ups come from this service only (one process, no channel)."""
    room, channel = WaitingRoom(), InProcessChannel()
    channel.listen(room)
    messaging.wake_up = channel.publish
    return LongPoll(messaging, room)


def make_app(messaging: Messaging, long_poll: LongPoll | None = None) -> WsgiApp:
    """Build the falcon application around a messaging service.

    The services are built here, once, and handed to the resources; every
    request passes the header and credential checks and then the queue-name
    check (``api/middleware.py``) before its responder runs. The operators'
    console (``api/console/``, HTML, not the v2 API) is added when
    ``[console] enabled``. ``long_poll``
    is the waiting claims' loop, fed by a channel the caller set up (by
    default one within this process: :func:`in_process_long_poll`).
    """
    sessions = messaging.console_session_token if messaging.settings.console_enabled else no_sessions
    middleware: list[Any] = [RequestContext(messaging.settings, messaging.clock, sessions),
                             QueueNameCheck(messaging.limits)]
    if messaging.settings.metrics.enabled:  # first: requests the checks refuse are counted too
        middleware.insert(0, metrics_api.RequestMetrics(messaging.storage.name))
        counted.initialise_series(messaging.storage.name)
    if messaging.settings.console_enabled:
        middleware.append(console.ConsolePages())
    app: WsgiApp = falcon.App(middleware=middleware)
    app.req_options.auto_parse_form_urlencoded = False
    app.req_options.strip_url_path_trailing_slash = True
    app.req_options.keep_blank_qs_values = False
    for template, resource in routes(messaging, subscription_service(messaging), long_poll):
        app.add_route(template, resource)
    for template, page in console.routes(messaging) if messaging.settings.console_enabled else []:
        app.add_route(template, page)
    app.add_error_handler(Exception, api_errors.handle_unexpected)
    app.add_error_handler(falcon.HTTPError, api_errors.handle_http_error)
    app.add_error_handler(errors.ZaqarLiteError, api_errors.handle_domain_error)
    return app
