"""What every dashboard page shares: the navigation context, rendering, form and query parsing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time
from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.params import FromQuery
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Template

from tribal_memory.auth.policy import Caller
from tribal_memory.base.errors import Forbidden, InvalidInput
from tribal_memory.interfaces.api.auth import CallerDep

FORM_MEDIA_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
"""Body media types of the dashboard's form posts (``opt["body_media_types"]``)."""
FORM_OPT: dict[str, Any] = {"body_media_types": FORM_MEDIA_TYPES}


@dataclass(frozen=True, slots=True)
class Chrome:
    """The frame around every page: who is signed in and which tab is open.

    ``who``: the key's owner, ``admin`` for an admin key, or ``open`` with
    authentication off. ``auth_on``: a sign-out button is shown.
    """

    active: str
    who: str
    admin: bool
    auth_on: bool


def chrome(request: HTMXRequest, caller: Caller, active: str) -> Chrome:
    """The frame of a page for ``caller``, with tab ``active`` highlighted."""
    auth_on = bool(request.app.state.get("auth_enabled", True))
    if not auth_on:
        who = "open (authentication off)"
    elif caller.admin:
        who = f"admin ({caller.owner})" if caller.owner else "admin"
    else:
        who = caller.owner or "?"
    return Chrome(active, who, caller.admin, auth_on)


def render(request: HTMXRequest, page: str, partial: str | None, **context: Any) -> Template:
    """``partials/<partial>`` for an htmx request that swaps a part, else ``pages/<page>``."""
    name = f"partials/{partial}" if partial is not None and request.htmx else f"pages/{page}"
    return Template(template_name=name, context=context)


def blank(value: str | None) -> str | None:
    """``value`` stripped, None when it is absent or blank (an empty form field)."""
    if value is None:
        return None
    value = value.strip()
    return value or None


def parse_day(value: str | None, *, end: bool = False) -> datetime | None:
    """A ``YYYY-MM-DD`` (or RFC 3339) form value as a UTC time; None when blank.

    ``end``: a bare date means the end of that day (for an "until" bound).

    Raises:
        InvalidInput: not a date or time.
    """
    value = blank(value)
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidInput(f"not a date (YYYY-MM-DD): {value!r}") from exc
    if len(value) == 10 and end:
        parsed = datetime.combine(parsed.date(), time.max)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_int(value: str | None, name: str, default: int) -> int:
    """An integer form value; ``default`` when blank.

    Raises:
        InvalidInput: not an integer.
    """
    value = blank(value)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise InvalidInput(f"{name} must be a whole number, not {value!r}") from exc


def split_tags(value: str | None) -> tuple[str, ...]:
    """Comma-separated tags of a form field, stripped, blanks dropped."""
    return tuple(t.strip() for t in (value or "").split(",") if t.strip())


def provide_form_owner_scope(caller: CallerDep, owner: FromQuery[str | None] = None) -> str | None:
    """The API's ``owner_scope`` for forms: an empty ``owner`` field means no owner named.

    Raises:
        Forbidden: a non-admin key named another owner (403).
    """
    return caller.scope(blank(owner))


_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SAME_SITE = frozenset({"same-origin", "none"})


async def same_origin_forms(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """Guard of the ``/ui`` router: a form post must come from a page of this server.

    :class:`~tribal_memory.interfaces.api.browser.BrowserGuard` already refuses
    a foreign ``Origin``; this also refuses a post a browser marks as sent
    from another site (``Sec-Fetch-Site``), should a browser leave ``Origin`` out.

    Raises:
        Forbidden: 403, an unsafe method whose ``Sec-Fetch-Site`` is another site.
    """
    if connection.scope.get("method", "GET") in _SAFE_METHODS:
        return
    site = connection.headers.get("sec-fetch-site")
    if site is not None and site.lower() not in _SAME_SITE:
        raise Forbidden(f"dashboard forms are only accepted from its own pages (sent {site})")
