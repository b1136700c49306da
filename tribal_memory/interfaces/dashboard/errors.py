"""Errors on dashboard pages: an HTML page with the API's status and code, or the login page.

A 401 (no key, or a revoked one) sends the browser to ``/ui/login`` (an htmx
request gets ``HX-Redirect``); every other error renders ``error.html`` with
the status and the same ``code`` and message the JSON API would give (an htmx
request gets the error as a fragment, which the page swaps in where the
answer was to go).
"""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException
from litestar.plugins.htmx import ClientRedirect
from litestar.response import Redirect, Template
from litestar.types import ExceptionHandlersMap

from tribal_memory.base.errors import TribalError
from tribal_memory.interfaces.api.errors import EXCEPTION_HANDLERS, handle_internal_error

LOGIN_PATH = "/ui/login"


def _page(request: Request[Any, Any, Any], status: int, code: str, detail: str) -> Response[Any]:
    if status == 401:
        if request.headers.get("hx-request") == "true":
            return ClientRedirect(LOGIN_PATH)
        return Redirect(LOGIN_PATH, status_code=303)
    htmx = request.headers.get("hx-request") == "true"
    return Template(
        template_name="partials/error.html" if htmx else "error.html",
        context={"status": status, "code": code, "detail": detail},
        status_code=status,
        media_type=MediaType.HTML,
    )


def _tribal(request: Request[Any, Any, Any], exc: TribalError) -> Response[Any]:
    return _page(request, exc.status, exc.code, exc.detail)


def _http(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    if exc.status_code >= 500:
        return _internal(request, exc)
    # The API's handler knows the codes and details; reuse its decision.
    answer = EXCEPTION_HANDLERS[HTTPException](request, exc)
    body = answer.content
    return _page(request, exc.status_code, body.error, body.detail)


def _internal(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    handle_internal_error(request, exc)  # logs the traceback
    return _page(request, 500, "internal_error", "internal server error")


DASHBOARD_EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    TribalError: _tribal,
    HTTPException: _http,
    Exception: _internal,
}
"""Exception handlers of the ``/ui`` router (the API's stay JSON)."""
