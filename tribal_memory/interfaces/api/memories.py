"""Memories: capture (single and batch), list, get, patch, delete under ``/v1/memories``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from litestar import Controller, Response, delete, get, patch, post
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, HeaderParameter, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_204_NO_CONTENT

from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.models import Memory, MemoryKind, SearchFilters, version_of
from tribal_memory.base.validation import MAX_FILTER_VALUES
from tribal_memory.interfaces.api.auth import CallerDep, OwnerScope
from tribal_memory.interfaces.api.convert import capture_out, memory_out
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.api.errors import error_responses
from tribal_memory.interfaces.api.knowledge_schemas import MemoryPageOut
from tribal_memory.interfaces.api.schemas import (
    BatchCaptureOut,
    BatchCaptureRequest,
    CaptureOut,
    CaptureRequest,
    MemoryOut,
    PatchRequest,
)

IfMatch = Annotated[
    str | None,
    HeaderParameter(
        name="if-match",
        description="Write only if the memory is still at this version (the ETag a GET, "
        "capture or update answered); else 412 and nothing is written.",
    ),
]


def expected_version(if_match: str | None) -> str | None:
    """The version an ``If-Match`` header asks for (None: absent or ``*``, any version).

    Raises:
        InvalidInput: a list of several ETags (give the one the memory was read at).
    """
    if if_match is None or if_match.strip() == "*":
        return None
    tags = [tag.strip() for tag in if_match.split(",") if tag.strip()]
    if len(tags) != 1:
        raise InvalidInput("If-Match must hold one ETag (or *)")
    tag = tags[0].removeprefix("W/")
    return tag[1:-1] if len(tag) >= 2 and tag[0] == tag[-1] == '"' else tag


def etag(memory: Memory) -> dict[str, str]:
    """The ``ETag`` header of a memory: its version, quoted."""
    return {"etag": f'"{version_of(memory)}"'}


_EXISTS = ResponseSpec(
    data_container=CaptureOut,
    generate_examples=False,
    description="The owner already had this content (status: exists); nothing was written.",
)


class MemoriesController(Controller):
    """CRUD over memories. Ids are the UUIDs returned by capture."""

    path = "/v1/memories"
    tags = ["memories"]

    @post(
        "/",
        sync_to_thread=True,
        status_code=HTTP_201_CREATED,
        responses={HTTP_200_OK: _EXISTS, **error_responses(400, 403, 413, 503)},
    )
    def capture(
        self, data: JSONBody[CaptureRequest], service: Service, caller: CallerDep
    ) -> Response[CaptureOut]:
        """Capture one memory, idempotently.

        Returns 201 with ``status: "created"`` for a new memory, 200 with
        ``status: "exists"`` when the owner already has the same content.

        Raises:
            InvalidInput: 400, empty content or owner, bad tag.
            TooLarge: 413, content over ``max_content_chars``.
            StoreUnavailable: 503, the write failed. EmbeddingError: 503.
        """
        result = service.capture(data.to_input(caller.write_owner(data.owner)))
        status = HTTP_201_CREATED if result.status == "created" else HTTP_200_OK
        return Response(capture_out(result), status_code=status, headers=etag(result.memory))

    @post(
        "/batch",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 403, 413, 503),
    )
    def capture_batch(
        self, data: JSONBody[BatchCaptureRequest], service: Service, caller: CallerDep
    ) -> BatchCaptureOut:
        """Capture many memories in one write; one invalid item rejects the whole batch.

        Returns one result per item, in request order, each ``created`` or ``exists``.
        With ``near_duplicates: false`` no result carries ``near_duplicate_of``.

        Raises:
            InvalidInput: 400, an item with empty content or owner, or a bad tag.
            TooLarge: 413, batch over ``max_batch_size`` or content over ``max_content_chars``.
            StoreUnavailable: 503, the write failed (nothing stored). EmbeddingError: 503.
        """
        items = [item.to_input(caller.write_owner(item.owner)) for item in data.memories]
        results = service.capture_batch(items, near_duplicates=data.near_duplicates)
        return BatchCaptureOut(results=[capture_out(result) for result in results])

    @get("/", sync_to_thread=True, responses=error_responses(400, 403, 413))
    def list_memories(
        self,
        service: Service,
        owner_scope: OwnerScope,
        include_shared: Annotated[
            bool, QueryParameter(description="With an owner: also list shared memories.")
        ] = True,
        tag: Annotated[
            list[str] | None,
            QueryParameter(
                description="Has this tag (repeat: any of them).", max_items=MAX_FILTER_VALUES
            ),
        ] = None,
        kind: Annotated[
            list[MemoryKind] | None,
            QueryParameter(description="Of this kind (repeat: any).", max_items=MAX_FILTER_VALUES),
        ] = None,
        source: Annotated[
            list[str] | None,
            QueryParameter(
                description="From this source (repeat: any).", max_items=MAX_FILTER_VALUES
            ),
        ] = None,
        since: Annotated[
            datetime | None,
            QueryParameter(description="Event (else creation) time at or after, RFC 3339."),
        ] = None,
        until: Annotated[
            datetime | None,
            QueryParameter(description="Event (else creation) time at or before, RFC 3339."),
        ] = None,
        limit: Annotated[
            int | None, QueryParameter(description="Most memories, 1 to max_k (default 100).")
        ] = None,
        after: Annotated[
            str | None, QueryParameter(description="The previous page's next_after.")
        ] = None,
    ) -> MemoryPageOut:
        """List memories passing the filters, one page at a time, by id.

        Pass ``next_after`` of a page as ``after`` to read the next; it is
        null on the last page. Memories written or deleted meanwhile do not
        shift the others (keyset paging).

        Raises:
            InvalidInput: 400, limit < 1, a time without a timezone.
            TooLarge: 413, limit over ``max_k``.
            Forbidden: 403, a non-admin key naming another owner.
        """
        filters = SearchFilters(
            owner=owner_scope,
            include_shared=include_shared,
            tags=tuple(tag or ()),
            kinds=tuple(kind or ()),
            sources=tuple(source or ()),
            since=since,
            until=until,
        )
        page = service.list_page(filters, limit=limit, after=after)
        return MemoryPageOut(
            memories=[memory_out(m) for m in page.memories], next_after=page.next_after
        )

    @get("/{memory_id:str}", sync_to_thread=True, responses=error_responses(404))
    def get_memory(
        self, memory_id: FromPath[str], service: Service, owner_scope: OwnerScope
    ) -> Response[MemoryOut]:
        """The memory with this id; its ``ETag`` header is its version (for ``If-Match``).

        Raises:
            NotFound: 404, no such memory, or not visible to ``owner``.
        """
        memory = service.get(memory_id, owner=owner_scope)
        return Response(memory_out(memory), headers=etag(memory))

    @patch(
        "/{memory_id:str}",
        sync_to_thread=True,
        responses=error_responses(400, 403, 404, 409, 412, 413),
    )
    def update_memory(
        self,
        memory_id: FromPath[str],
        data: JSONBody[PatchRequest],
        service: Service,
        owner_scope: OwnerScope,
        caller: CallerDep,
        if_match: IfMatch = None,
    ) -> Response[MemoryOut]:
        """Change fields of a memory (absent fields stay); new content is re-embedded.

        Returns the updated memory with its new ``ETag``. New content gives the
        memory the id capture gives that content (``memory_id`` in the answer):
        capturing the old text again stores it anew. Updates of one memory apply
        one after the other; send ``If-Match`` to change it only if nobody else
        did since you read it.

        Raises:
            NotFound: 404, no such memory visible to ``owner``.
            Forbidden: 403, a shared memory and a key that is not an admin's.
            Conflict: 409, the new content equals another memory of the owner,
                or the memory is part of an ingested document.
            PreconditionFailed: 412, ``If-Match`` names another version.
            InvalidInput: 400 / TooLarge: 413, as for capture.
        """
        memory = service.update(
            memory_id,
            data.to_patch(),
            owner=owner_scope,
            if_version=expected_version(if_match),
            shared_writable=caller.admin,
        )
        return Response(memory_out(memory), headers=etag(memory))

    @delete(
        "/{memory_id:str}",
        sync_to_thread=True,
        status_code=HTTP_204_NO_CONTENT,
        responses=error_responses(403, 404, 412),
    )
    def delete_memory(
        self,
        memory_id: FromPath[str],
        service: Service,
        owner_scope: OwnerScope,
        caller: CallerDep,
        if_match: IfMatch = None,
    ) -> None:
        """Delete a memory, its relations and everything learned about it (204).

        Raises:
            NotFound: 404, no such memory, or not visible to ``owner``.
            Forbidden: 403, a shared memory and a key that is not an admin's.
            PreconditionFailed: 412, ``If-Match`` names another version.
        """
        service.delete(
            memory_id,
            owner=owner_scope,
            if_version=expected_version(if_match),
            shared_writable=caller.admin,
        )
