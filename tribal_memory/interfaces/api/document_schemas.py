"""Request and response bodies of ``/v1/documents`` (msgspec Structs)."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime

import msgspec

from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.models import DocumentStatus
from tribal_memory.documents.parsing import document_format


class DocumentRequest(msgspec.Struct, forbid_unknown_fields=True):
    """A document to ingest: its path, owner and content.

    ``path`` names the document (recorded as its chunks' ``source``; with
    ``owner`` it identifies the document; ``owner`` defaults to the caller's
    own, ``shared`` without authentication) and its extension picks the
    format: ``.md``/``.markdown``, ``.txt``, ``.pdf``. Send exactly one of
    ``text`` (Markdown or plain text) and ``content_base64`` (the file's
    bytes in standard base64; required for a PDF).
    """

    path: str
    owner: str | None = None
    text: str | None = None
    content_base64: str | None = None

    def content(self) -> bytes:
        """The document's bytes (``text`` as UTF-8).

        Raises:
            InvalidInput: neither or both of ``text`` and ``content_base64``,
                a PDF sent as ``text``, invalid base64, an unsupported extension.
        """
        fmt = document_format(self.path)
        if (self.text is None) == (self.content_base64 is None):
            raise InvalidInput("send exactly one of text and content_base64")
        if self.text is not None:
            if fmt == "pdf":
                raise InvalidInput("send a PDF as content_base64")
            return self.text.encode("utf-8")
        assert self.content_base64 is not None
        try:
            return base64.b64decode(self.content_base64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidInput(f"content_base64 is not valid base64: {exc}") from exc


class DocumentOut(msgspec.Struct):
    """What ingesting (or deleting) a document did.

    ``status``: ``created`` (new document), ``updated`` (content changed:
    chunks replaced), ``unchanged`` (same content; nothing done) or
    ``deleted``. ``chunks``: chunks the document has now. ``added`` /
    ``removed``: chunk memories stored / deleted by this request.
    """

    path: str
    owner: str
    doc_id: str
    status: DocumentStatus
    chunks: int
    added: int
    removed: int


class DocumentInfoOut(msgspec.Struct):
    """A stored document.

    ``format``: ``markdown``, ``text`` or ``pdf``. ``content_hash``: SHA-256
    (hex) of the bytes last ingested; ``byte_size``: their length in bytes.
    ``chunk_ids``: its chunk memories in document order.
    """

    path: str
    owner: str
    doc_id: str
    format: str
    content_hash: str
    byte_size: int
    chunk_ids: list[str]
    ingested_at: datetime


class DocumentsOut(msgspec.Struct):
    """Documents by owner and path (empty: none)."""

    documents: list[DocumentInfoOut]
