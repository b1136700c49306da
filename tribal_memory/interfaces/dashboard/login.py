"""Signing in to the dashboard: the API key, entered once per browser session, kept in a cookie.

``POST /ui/login`` checks the key with :meth:`MemoryService.authenticate` and
sets :data:`~tribal_memory.interfaces.api.auth.KEY_COOKIE` (HttpOnly,
SameSite=Strict, path ``/ui``, no expiry: it ends with the browser session;
Secure over https). The guard reads it on every ``/ui`` request and checks
the key again, so a revoked key signs the session out at once.
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio.to_thread
from litestar import Request, get, post
from litestar.datastructures import Cookie
from litestar.enums import RequestEncodingType
from litestar.params import Body
from litestar.response import Redirect, Response, Template

from tribal_memory.interfaces.api.auth import AUTH_STATE_KEY, KEY_COOKIE, PUBLIC
from tribal_memory.interfaces.api.deps import provide_service
from tribal_memory.interfaces.dashboard.common import FORM_MEDIA_TYPES

HOME = "/ui/memories"
COOKIE_PATH = "/ui"

FormBody = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]


def _form(message: str | None, status: int) -> Template:
    return Template(
        template_name="pages/login.html", context={"message": message}, status_code=status
    )


@get("/login", opt=PUBLIC)
async def login_form(request: Request[Any, Any, Any]) -> Response[Any]:
    """The key form (straight to the memories when authentication is off)."""
    if not request.app.state.get(AUTH_STATE_KEY, True):
        return Redirect(HOME, status_code=303)
    return _form(None, 200)


@post("/login", opt={**PUBLIC, "body_media_types": FORM_MEDIA_TYPES}, status_code=200)
async def login(request: Request[Any, Any, Any], data: FormBody) -> Response[Any]:
    """Check the key; on success set the session cookie and go to the memories, else 401."""
    key = (data.get("key") or "").strip()
    service = provide_service(request.app.state)
    caller = await anyio.to_thread.run_sync(service.authenticate, key) if key else None
    if caller is None:
        return _form("unknown or revoked API key", 401)
    cookie = Cookie(
        key=KEY_COOKIE,
        value=key,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return Redirect(HOME, status_code=303, cookies=[cookie])


@post("/logout", opt={**PUBLIC, "body_media_types": FORM_MEDIA_TYPES}, status_code=200)
async def logout() -> Response[Any]:
    """Forget the key in this browser and show the key form."""
    gone = Cookie(key=KEY_COOKIE, value="", path=COOKIE_PATH, max_age=0, httponly=True)
    return Redirect("/ui/login", status_code=303, cookies=[gone])
