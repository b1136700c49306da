"""Exception handlers: every error leaves the API as ``{"error", "detail", "status"}``.

Codes: a :class:`~tribal_memory.base.errors.TribalError` keeps its own ``code``
(``invalid_input``, ``unauthorized``, ``forbidden``, ``too_large``,
``not_found``, ``conflict``, ``embedding_model_mismatch``, ``store_unavailable``,
``embedding_unavailable``).
Litestar's own HTTP errors map by status: a body that is not JSON, not UTF-8
or not of the declared shape is ``400 invalid_request``; an unknown route
``404 not_found``; a wrong method ``405 method_not_allowed``; a body over
``max_request_bytes`` ``413 too_large``. Anything else is ``500
internal_error`` with a fixed detail: the traceback is logged, never returned.
"""

from __future__ import annotations

import logging
import re
from http import HTTPStatus
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.openapi.datastructures import ResponseSpec
from litestar.types import ExceptionHandlersMap

from tribal_memory.base.errors import TribalError
from tribal_memory.interfaces.api.schemas import ErrorOut

logger = logging.getLogger("tribal_memory.interfaces.api")

_CODES = {
    400: "invalid_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
}
_INTERNAL_DETAIL = "internal server error"
MAX_DETAIL_CHARS = 1_000
"""Longest ``detail`` of an error body: a message that quotes the request is cut there."""


def error_response(
    code: str, detail: str, status: int, headers: dict[str, str] | None = None
) -> Response[ErrorOut]:
    """A JSON error response in the API's one error shape (``detail`` cut at 1,000 characters)."""
    if len(detail) > MAX_DETAIL_CHARS:
        detail = detail[: MAX_DETAIL_CHARS - 1] + "…"
    return Response(
        ErrorOut(error=code, detail=detail, status=status),
        status_code=status,
        media_type=MediaType.JSON,
        headers=headers,
    )


def error_responses(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI entries for the error statuses a route can answer (all in :class:`ErrorOut`)."""
    return {
        status: ResponseSpec(
            data_container=ErrorOut,
            generate_examples=False,
            description=f"{HTTPStatus(status).phrase} (error body)",
        )
        for status in statuses
    }


def _code_for(status: int) -> str:
    if status in _CODES:
        return _CODES[status]
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "http_error"


def _validation_detail(exc: ValidationException) -> str:
    """Litestar's summary plus each field error (``message at key``)."""
    problems: list[str] = []
    if isinstance(exc.extra, list):
        for item in exc.extra:
            if isinstance(item, dict) and "message" in item:
                key, message = item.get("key"), str(item["message"])
                if item.get("source") == "body" and message == f"'{key}'":
                    message = "a JSON request body is required"  # Litestar reports a KeyError
                problems.append(f"{message} (at {key})" if key else message)
    return f"{exc.detail}: {'; '.join(problems)}" if problems else exc.detail


def handle_tribal_error(request: Request[Any, Any, Any], exc: TribalError) -> Response[ErrorOut]:
    """An error raised on purpose by the core: its own status, code and message."""
    if exc.status >= 500:
        logger.error("%s %s failed: %s: %s", request.method, request.url.path, exc.code, exc)
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return error_response(exc.code, exc.detail, exc.status, headers)


def handle_http_exception(
    request: Request[Any, Any, Any], exc: HTTPException
) -> Response[ErrorOut]:
    """Litestar's routing, parsing and size errors; 5xx ones are treated as internal."""
    if exc.status_code >= 500:
        return handle_internal_error(request, exc)
    detail = _validation_detail(exc) if isinstance(exc, ValidationException) else exc.detail
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no route for {request.method} {request.url.path}"
    elif isinstance(exc, RequestEntityTooLarge):
        limit = request.app.state.get("max_request_bytes")
        detail = f"request body is over the limit of {limit} bytes (TRIBAL_MAX_REQUEST_BYTES)"
    return error_response(_code_for(exc.status_code), detail, exc.status_code, exc.headers)


def handle_too_deep(request: Request[Any, Any, Any], exc: RecursionError) -> Response[ErrorOut]:
    """A JSON body nested deeper than the decoder's recursion limit: the client's error."""
    return error_response("invalid_request", "JSON body is nested too deeply", 400)


_YEAR_OUT_OF_RANGE = re.compile(r"^year -?\d+ is out of range$")


def handle_value_error(request: Request[Any, Any, Any], exc: ValueError) -> Response[ErrorOut]:
    """A time the request gives as seconds since the epoch past year 9999: 400.

    msgspec, decoding a request's number into a ``datetime`` (Litestar decodes
    parameters leniently), raises Python's own ``ValueError("year 10000 is out
    of range")`` rather than a validation error. Any other ValueError is a
    server bug (500).
    """
    if isinstance(exc, OverflowError) or _YEAR_OUT_OF_RANGE.match(str(exc)):
        detail = "a time in the request is out of range (years 1 to 9999)"
        return error_response("invalid_request", detail, 400)
    return handle_internal_error(request, exc)


def handle_internal_error(request: Request[Any, Any, Any], exc: Exception) -> Response[ErrorOut]:
    """Anything unexpected: log the traceback, answer a fixed 500 without details."""
    logger.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response("internal_error", _INTERNAL_DETAIL, 500)


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    TribalError: handle_tribal_error,
    HTTPException: handle_http_exception,
    RecursionError: handle_too_deep,
    ValueError: handle_value_error,
    OverflowError: handle_value_error,
    Exception: handle_internal_error,
}
"""Handlers for ``Litestar(exception_handlers=...)``; the most specific class wins."""
