"""The error tree. Each error carries its HTTP status and a stable code.

The API turns any :class:`TribalError` into
``{"error": code, "detail": message, "status": status}``; the CLI prints the
message on one line and exits non-zero. Third-party exceptions are translated
into these at the seam where they arise (``raise ... from exc``).
"""

from __future__ import annotations


class TribalError(Exception):
    """Base of every error this package raises on purpose."""

    status: int = 500
    code: str = "internal_error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class InvalidInput(TribalError):
    """Input that cannot be acted on: empty content, bad filter, unknown option."""

    status = 400
    code = "invalid_input"


class TooLarge(TribalError):
    """Content, batch or ``k`` over the configured limit."""

    status = 413
    code = "too_large"


class Unauthorized(TribalError):
    """Authentication is on and the request carries no valid API key."""

    status = 401
    code = "unauthorized"


class Forbidden(TribalError):
    """The caller's key may not act for the owner it named (or needs to be an admin key)."""

    status = 403
    code = "forbidden"


class ForeignOrigin(Forbidden):
    """A browser request from a web origin not in ``TRIBAL_CORS_ORIGINS``."""

    code = "forbidden_origin"


class UnsupportedMediaType(TribalError):
    """A request body whose ``Content-Type`` the route does not read (e.g. not JSON)."""

    status = 415
    code = "unsupported_media_type"


class MisdirectedRequest(TribalError):
    """A ``Host`` header this server does not answer for (see ``TRIBAL_ALLOWED_HOSTS``)."""

    status = 421
    code = "invalid_host"


class NotFound(TribalError):
    """No memory (or relation) with that id is visible to the caller."""

    status = 404
    code = "not_found"


class Conflict(TribalError):
    """The request contradicts what is stored (e.g. an update that duplicates another memory)."""

    status = 409
    code = "conflict"


class PreconditionFailed(TribalError):
    """A conditional write (``If-Match``) named a version that is no longer the stored one."""

    status = 412
    code = "precondition_failed"


class EmbeddingModelMismatch(Conflict):
    """The store was built with another embedding model or dimension."""

    code = "embedding_model_mismatch"


class StoreUnavailable(TribalError):
    """LanceDB or SQLite cannot be opened, read or written."""

    status = 503
    code = "store_unavailable"


class EmbeddingError(TribalError):
    """The embedding model cannot be loaded or failed on an input."""

    status = 503
    code = "embedding_unavailable"
