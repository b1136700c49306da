"""Export and import: ``GET /v1/export`` streams JSON lines, ``POST /v1/import`` reads them.

The format is described in :mod:`tribal_memory.ops.transfer.records`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Annotated, Literal

from litestar import get, post
from litestar.openapi.spec import OpenAPIMediaType, OpenAPIType, Operation, RequestBody, Schema
from litestar.params import QueryParameter, RawBody
from litestar.response import Stream
from litestar.status_codes import HTTP_200_OK

from tribal_memory.interfaces.api.auth import CallerDep, OwnerScope
from tribal_memory.interfaces.api.browser import BODY_MEDIA_TYPES_OPT
from tribal_memory.interfaces.api.convert import import_out
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.api.errors import error_responses
from tribal_memory.interfaces.api.transfer_schemas import ImportOut
from tribal_memory.ops.transfer import MEDIA_TYPE

IMPORT_MEDIA_TYPES = (MEDIA_TYPE, "application/jsonl", "application/json")
"""Media types ``POST /v1/import`` reads (browsers cannot send them without a preflight)."""
CHUNK_BYTES = 64 * 1024
"""Lines are sent in chunks of about this many bytes (one worker-thread hop per chunk)."""


def _chunks(lines: Iterable[str], size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Whole lines joined into chunks of at least ``size`` bytes (the last may be shorter)."""
    pending: list[bytes] = []
    length = 0
    for line in lines:
        data = line.encode("utf-8")
        pending.append(data)
        length += len(data)
        if length >= size:
            yield b"".join(pending)
            pending, length = [], 0
    if pending:
        yield b"".join(pending)


@dataclass
class _JsonLinesBody(Operation):
    """OpenAPI operation whose request body is an export (the handler reads the raw body)."""

    def __post_init__(self) -> None:
        self.request_body = RequestBody(
            content={MEDIA_TYPE: OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING))},
            description="JSON lines as written by GET /v1/export.",
            required=True,
        )


@get(
    "/v1/export",
    sync_to_thread=False,
    tags=["transfer"],
    media_type=MEDIA_TYPE,
    responses=error_responses(400, 403, 503),
)
def export(service: Service, owner_scope: OwnerScope) -> Stream:
    """Stream memories, relations and learned data as JSON lines (``application/x-ndjson``).

    The first line is a header (format, version, embedding model and
    dimension, time, owner), then one line per memory (with its vector as
    base64 float32), relation and learned-table row, and last an end record
    with counts. With ``owner``, only what that owner sees: its and shared
    memories and the relations and learned rows belonging to them; a
    non-admin key always exports its own owner's view. The
    stream is read from the store batch by batch; if reading fails midway
    it stops without the end record, which ``POST /v1/import`` rejects.

    Raises:
        InvalidInput: 400, an empty or over-long ``owner``.
        Forbidden: 403, a non-admin key named another owner.
        StoreUnavailable: 503, the service is not open.
    """
    lines = service.export_jsonl(owner=owner_scope)
    return Stream(
        _chunks(lines),
        media_type=MEDIA_TYPE,
        headers={"content-disposition": 'attachment; filename="tribal-memory-export.jsonl"'},
    )


@post(
    "/v1/import",
    sync_to_thread=True,
    status_code=HTTP_200_OK,
    tags=["transfer"],
    responses=error_responses(400, 403, 413, 503),
    operation_class=_JsonLinesBody,
    opt={BODY_MEDIA_TYPES_OPT: IMPORT_MEDIA_TYPES},
)
def import_(
    body: RawBody,
    service: Service,
    caller: CallerDep,
    on_conflict: Annotated[
        Literal["keep", "replace"],
        QueryParameter(
            description="A memory stored here with other fields than the file's: keep the "
            "stored one (default; listed in conflict_ids) or replace it with the file's."
        ),
    ] = "keep",
) -> ImportOut:
    """Import an export (the body, ``application/x-ndjson``): ids, vectors, times are kept.

    A body of another media type is refused (415; ``application/jsonl`` and
    ``application/json`` are accepted too).

    The whole body is checked before anything is written. From another
    embedding model, content is embedded again with this server's
    (``reembedded``). Memories, relations and rows that exist are skipped, so
    sending the same file twice changes nothing the second time. A memory id
    must be the one capture gives the record's owner and content. A memory
    stored here with other fields than the file's is a conflict: reported in
    ``conflicts`` and kept, or overwritten with ``on_conflict=replace``.

    Raises:
        InvalidInput: 400, not an export, an unknown version, a bad line (its
            number is in the detail) or a truncated file; nothing is written.
        TooLarge: 413, body over ``max_request_bytes`` or a memory over
            ``max_content_chars``; nothing is written.
        StoreUnavailable / EmbeddingError: 503, a write failed; it is undone.
        Forbidden: 403, not an admin key (an import writes for any owner).
        UnsupportedMediaType: 415, a body that is not JSON lines.
    """
    caller.require_admin("import")
    return import_out(service.import_jsonl(body, on_conflict=on_conflict))
