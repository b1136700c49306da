"""Browser protections: what keeps a web page from using a server on the user's machine.

A page in the user's browser can send requests to ``127.0.0.1`` ("simple"
cross-origin requests need no CORS preflight: a ``POST`` with a
``text/plain`` or form body is sent, only its answer is hidden), and through
DNS rebinding it can make its own host name resolve to ``127.0.0.1`` and read
the answers too. Local developer servers close both holes the same way
(e.g. webpack-dev-server's ``allowedHosts``, Vite's ``server.allowedHosts``,
the MCP SDK's transport security), and so does :class:`BrowserGuard`, before
the guard, body parsing and the handler:

1. ``Host`` must name this server (see ``Settings.host_allow_list``): else 421.
2. A request carrying ``Origin`` must come from this server's own origin or
   from ``TRIBAL_CORS_ORIGINS``: else 403. Agents, the CLI and curl send no
   ``Origin``; browsers send it on every cross-origin request and every ``POST``.
3. A body sent to a route that reads JSON must be ``application/json`` (raw
   body routes name their own media types in ``opt["body_media_types"]``):
   else 415. A cross-origin JSON request needs a preflight, which (1) and (2)
   refuse.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from litestar.datastructures import Headers
from litestar.enums import ScopeType
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Receive, Scope, Send

from tribal_memory.base.errors import ForeignOrigin, MisdirectedRequest, UnsupportedMediaType

JSON_MEDIA_TYPES = ("application/json",)
BODY_MEDIA_TYPES_OPT = "body_media_types"
"""``opt`` key of a raw-body route: the media types its body may have."""


def host_name(host: str) -> str:
    """The lower-case name of a ``Host`` header or URL netloc, without port or IPv6 brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _media_type(headers: Headers) -> str:
    return headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _has_body(headers: Headers) -> bool:
    length = headers.get("content-length")
    if length is not None:
        return length.strip() not in ("", "0")
    return "transfer-encoding" in headers


def body_media_types(handler: BaseRouteHandler | None) -> tuple[str, ...] | None:
    """The media types a route's request body may have; None when it reads no body."""
    if handler is None:
        return None
    declared = handler.opt.get(BODY_MEDIA_TYPES_OPT)
    if declared is not None:
        return tuple(declared)
    if "data" in handler.parsed_fn_signature.parameters:
        return JSON_MEDIA_TYPES
    return None


class BrowserGuard(ASGIMiddleware):
    """ASGI middleware enforcing the ``Host``, ``Origin`` and ``Content-Type`` rules above.

    Args:
        allowed_hosts: Lower-case host names answered for; None: any.
        cors_origins: Origins (``scheme://host[:port]``) allowed besides this
            server's own; ``*`` allows any.

    Raises (turned into the API's JSON error by the exception handlers):
        MisdirectedRequest: 421, a ``Host`` not in ``allowed_hosts``.
        ForeignOrigin: 403, an ``Origin`` that is neither this server nor allowed.
        UnsupportedMediaType: 415, a body of a media type the route does not read.
    """

    scopes = (ScopeType.HTTP,)

    def __init__(self, allowed_hosts: frozenset[str] | None, cors_origins: tuple[str, ...]) -> None:
        self.allowed_hosts = allowed_hosts
        self.cors_origins = frozenset(o.rstrip("/").lower() for o in cors_origins)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        """Check the request's headers, then pass it on unchanged."""
        headers = Headers.from_scope(scope)
        host = headers.get("host")
        if not self._host_allowed(host):
            raise MisdirectedRequest(
                f"this server does not answer for host {host_name(host or '')!r} "
                "(TRIBAL_ALLOWED_HOSTS lists the names it answers for)"
            )
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin, host):
            raise ForeignOrigin(
                f"requests from the web origin {origin!r} are not allowed "
                "(TRIBAL_CORS_ORIGINS lists the origins that may call this server)"
            )
        accepted = body_media_types(scope.get("route_handler"))
        if accepted is not None and _has_body(headers) and _media_type(headers) not in accepted:
            raise UnsupportedMediaType(
                f"request body must be {' or '.join(accepted)}, "
                f"not {_media_type(headers) or 'untyped'!r}"
            )
        await next_app(scope, receive, send)

    def _host_allowed(self, host: str | None) -> bool:
        # No Host header at all (HTTP/1.0): not a browser, which always sends one.
        return self.allowed_hosts is None or host is None or host_name(host) in self.allowed_hosts

    def _origin_allowed(self, origin: str, host: str | None) -> bool:
        origin = origin.strip().rstrip("/").lower()
        if "*" in self.cors_origins or origin in self.cors_origins:
            return True
        parts = urlsplit(origin)
        # Same origin (e.g. the Swagger UI this server serves): the Host check above
        # already holds the host name to this server's own.
        same_origin = host is not None and parts.netloc == host.lower()
        return same_origin and parts.scheme in ("http", "https")
