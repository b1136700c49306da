"""Documents: ingest, list and delete under ``/v1/documents``."""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Controller, Response, delete, get, post
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from tribal_memory.base.errors import Forbidden
from tribal_memory.base.models import SHARED_OWNER, DocumentResult
from tribal_memory.interfaces.api.auth import CallerDep, OwnerScope
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.api.document_schemas import (
    DocumentInfoOut,
    DocumentOut,
    DocumentRequest,
    DocumentsOut,
)
from tribal_memory.interfaces.api.errors import error_responses

_NOT_CREATED = ResponseSpec(
    data_container=DocumentOut,
    generate_examples=False,
    description="The document existed: status updated (chunks replaced) or unchanged.",
)


def _result_out(result: DocumentResult) -> DocumentOut:
    return msgspec.convert(result, DocumentOut, from_attributes=True)


class DocumentsController(Controller):
    """Documents (.md, .txt, .pdf) kept as chunk memories, one per (owner, path)."""

    path = "/v1/documents"
    tags = ["documents"]

    @post(
        "/",
        sync_to_thread=True,
        status_code=HTTP_201_CREATED,
        responses={HTTP_200_OK: _NOT_CREATED, **error_responses(400, 403, 413, 503)},
    )
    def ingest(
        self, data: JSONBody[DocumentRequest], service: Service, caller: CallerDep
    ) -> Response[DocumentOut]:
        """Ingest a document: chunk it (token-sized, overlapping, along headings) and store it.

        Returns 201 with ``status: "created"`` for a new (owner, path); 200 with
        ``updated`` when its content changed (new chunks stored, chunks no
        longer produced deleted with their learned data) or ``unchanged`` when
        it did not (nothing done).

        ``owner`` defaults to the caller's own (``shared`` without authentication).

        Raises:
            Forbidden: 403, a key naming an owner other than its own, or
                ``shared`` without an admin key.
            InvalidInput: 400, bad path, owner or content field, unsupported
                extension, text that is not UTF-8, a corrupt, password-protected
                or text-less PDF.
            TooLarge: 413, over ``max_document_bytes``, ``max_document_chars`` or
                ``max_document_chunks``, a chunk over ``max_content_chars``, or a PDF
                whose text took over ``pdf_timeout_s`` to extract.
            StoreUnavailable / EmbeddingError: 503.
        """
        owner = caller.write_owner(data.owner)
        if owner == SHARED_OWNER and not caller.admin:
            raise Forbidden("ingesting a shared document needs an admin key")
        result = service.ingest_document(data.path, data.content(), owner=owner)
        status = HTTP_201_CREATED if result.status == "created" else HTTP_200_OK
        return Response(_result_out(result), status_code=status)

    @get("/", sync_to_thread=True, responses=error_responses(403))
    def list_documents(self, service: Service, owner_scope: OwnerScope) -> DocumentsOut:
        """Ingested documents of ``owner`` and shared ones (all without ``owner``)."""
        documents = [
            msgspec.convert(info, DocumentInfoOut, from_attributes=True)
            for info in service.documents(owner=owner_scope)
        ]
        return DocumentsOut(documents=documents)

    @delete(
        "/",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 403, 404),
    )
    def delete_document(
        self,
        service: Service,
        owner_scope: OwnerScope,
        caller: CallerDep,
        path: Annotated[str, QueryParameter(description="The document's path as ingested.")],
    ) -> DocumentOut:
        """Delete a document with its chunks and everything learned about them.

        Returns ``status: "deleted"`` and the number of chunk memories removed
        (chunks another document of the owner also holds stay).

        Raises:
            NotFound: 404, no document at ``path`` visible to ``owner``.
            Forbidden: 403, a key naming another owner, or a shared document
                and a key that is not an admin's.
            InvalidInput: 400, no ``owner`` and several owners have that path.
        """
        result = service.delete_document(path, owner=owner_scope, shared_writable=caller.admin)
        return _result_out(result)
