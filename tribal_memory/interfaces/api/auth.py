"""Authentication of HTTP requests: the guard and the ``caller`` and ``owner_scope`` dependencies.

The guard runs before every handler that is not marked public (``opt={"public":
True}``: health, the OpenAPI schema and docs). With authentication off
(``TRIBAL_AUTH=off``, or ``auto`` on a loopback bind) every request acts as
:data:`~tribal_memory.auth.keys.OPEN`; otherwise it must carry
``Authorization: Bearer <key>`` (401 without a valid one) and acts as the key's
:class:`~tribal_memory.auth.keys.Caller`. The dashboard's browser session
carries the same key in the :data:`KEY_COOKIE` cookie instead (set by
``/ui/login``); the header wins when both are sent, and the key is checked
again on every request, so a revoked key ends the session at once.
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio.to_thread
from litestar.connection import ASGIConnection
from litestar.di import NamedDependency, Provide
from litestar.handlers.base import BaseRouteHandler
from litestar.params import QueryParameter

from tribal_memory.auth.policy import OPEN, Caller
from tribal_memory.base.errors import Unauthorized
from tribal_memory.interfaces.api.deps import Service, provide_service

CALLER_STATE_KEY = "caller"
AUTH_STATE_KEY = "auth_enabled"
PUBLIC = {"public": True}
"""``opt`` of handlers that answer without a key."""
KEY_COOKIE = "tribal_key"
"""Cookie holding the API key of a dashboard session (HttpOnly, SameSite=Strict)."""
_PUBLIC_PATHS = ("/schema",)  # the OpenAPI router, which Litestar builds itself


async def authenticate(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """Guard: resolve the request's caller, or refuse it.

    Raises:
        Unauthorized: authentication is on and the request has no valid key (401).
    """
    if handler.opt.get("public") or connection.scope["path"].startswith(_PUBLIC_PATHS):
        return
    if not connection.app.state.get(AUTH_STATE_KEY, True):
        connection.state[CALLER_STATE_KEY] = OPEN
        return
    header = connection.headers.get("authorization")
    if header is None:
        scheme, token = "bearer", connection.cookies.get(KEY_COOKIE, "").strip()
    else:
        scheme, _, token = header.partition(" ")
        token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("an API key is required: send 'Authorization: Bearer <key>'")
    service = provide_service(connection.app.state)
    caller = await anyio.to_thread.run_sync(service.authenticate, token)
    if caller is None:
        raise Unauthorized("unknown or revoked API key")
    connection.state[CALLER_STATE_KEY] = caller


def provide_caller(request: ASGIConnection[Any, Any, Any, Any], service: Service) -> Caller:
    """The caller the guard resolved for this request (of the open ``service``).

    ``service`` is resolved first so that a handler's dependencies resolve
    one after the other: Litestar resolves dependencies that do not depend
    on each other concurrently, in a task group, which cost a query-cache
    hit 0.12-0.2 ms of the event loop's time (its ASGI call 0.86-0.94 ms
    against 0.98-1.15, scratch timing hook in a server at 10k).

    Raises:
        Unauthorized: the guard did not run (a public handler asked for a caller).
        StoreUnavailable: the service is not open (as ``provide_service``).
    """
    del service  # only its order matters
    caller = request.state.get(CALLER_STATE_KEY)
    if not isinstance(caller, Caller):
        raise Unauthorized("this route has no authenticated caller")
    return caller


CallerDep = NamedDependency[Caller]
"""Annotation of a handler's ``caller`` parameter."""


def provide_owner_scope(
    caller: CallerDep,
    owner: Annotated[
        str | None,
        QueryParameter(
            description="Only this owner's and shared memories are visible (a non-admin key: "
            "its own owner, whatever is named here)."
        ),
    ] = None,
) -> str | None:
    """The owner a request is scoped to: ``?owner=`` as the caller may use it.

    Raises:
        Forbidden: a non-admin key named another owner (403).
    """
    return caller.scope(owner)


OwnerScope = NamedDependency[str | None]
"""Annotation of a handler's ``owner_scope`` parameter: the owner it may read and write."""

AUTH_DEPENDENCIES = {
    "caller": Provide(provide_caller, sync_to_thread=False),
    "owner_scope": Provide(provide_owner_scope, sync_to_thread=False),
}
