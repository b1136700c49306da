"""Documents: the ingested tree with sections and summaries; store health and optimize."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from litestar import get, post
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromQuery
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Template

from tribal_memory.base.errors import NotFound
from tribal_memory.base.models import DocumentInfo, Memory, SearchFilters
from tribal_memory.interfaces.api.auth import CallerDep, OwnerScope
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.dashboard.common import FORM_OPT, blank, chrome, render
from tribal_memory.service.memory_service import MemoryService

MAX_SUMMARIES = 500
"""Most summary memories read for one document's tree."""


@dataclass(frozen=True, slots=True)
class Section:
    """One heading section of a document: its summary (None: none made) and chunks in order."""

    index: int | None
    heading: str
    level: int
    summary: Memory | None
    chunks: tuple[Memory, ...]


@dataclass(frozen=True, slots=True)
class DocumentTree:
    """A document with its summary and its sections in document order."""

    info: DocumentInfo
    summary: Memory | None
    sections: tuple[Section, ...]


@dataclass(frozen=True, slots=True)
class DocumentsView:
    """The documents page: the owner's documents, and the store's health for an admin.

    ``health``: fragments, small fragments, unindexed rows and versions of the
    memory table (None for a non-admin key). ``optimized``: the page follows
    an optimize run.
    """

    owner: str
    documents: tuple[DocumentInfo, ...]
    health: dict[str, int] | None
    table_version: int | None
    optimized: bool


def _documents_view(
    service: MemoryService, owner_scope: str | None, admin: bool, owner: str, optimized: bool
) -> DocumentsView:
    health = service.table_health() if admin else None
    version = service.stats().table_version if admin else None
    documents = tuple(service.documents(owner=owner_scope))
    return DocumentsView(owner, documents, health, version, optimized)


@get("/documents", sync_to_thread=True)
def documents_page(
    request: HTMXRequest, service: Service, caller: CallerDep, owner_scope: OwnerScope
) -> Template:
    """Ingested documents (each opens into its tree) and, for an admin, the store's health."""
    view = _documents_view(
        service, owner_scope, caller.admin, request.query_params.get("owner", ""), False
    )
    return render(
        request, "documents.html", None, chrome=chrome(request, caller, "documents"), view=view
    )


@get("/documents/tree", sync_to_thread=True)
def document_tree(
    service: Service,
    owner_scope: OwnerScope,
    path: FromQuery[str],
    doc_owner: FromQuery[str | None] = None,
) -> Template:
    """One document's sections with their summaries and chunks (a fragment).

    Raises:
        NotFound: 404, no document at ``path`` (of ``doc_owner``) visible to the caller.
    """
    wanted = blank(doc_owner)
    found = [
        d
        for d in service.documents(owner=owner_scope)
        if d.path == path and (wanted is None or d.owner == wanted)
    ]
    if not found:
        raise NotFound(f"no document at {path!r}")
    info = found[0]
    chunks = service.get_many(list(dict.fromkeys(info.chunk_ids)), owner=owner_scope)
    filters = SearchFilters(
        owner=info.owner, include_shared=False, kinds=("summary",), sources=(info.path,)
    )
    summaries = [
        m for m in service.list_memories(filters, limit=MAX_SUMMARIES) if m.doc_id == info.doc_id
    ]
    tree = build_tree(info, [chunks[i] for i in info.chunk_ids if i in chunks], summaries)
    return Template(template_name="partials/document_tree.html", context={"tree": tree})


def build_tree(info: DocumentInfo, chunks: list[Memory], summaries: list[Memory]) -> DocumentTree:
    """Group a document's chunks (in order) by section, each with its section summary.

    A chunk's section is its ``metadata["section"]``; a summary's is its
    ``metadata["section"]`` and the one with ``summary_of: "document"`` is the
    document's own. Sections come in index order, those without one last.
    """
    doc_summary = next((s for s in summaries if s.metadata.get("summary_of") == "document"), None)
    by_section: dict[int | None, Memory] = {
        _section(s): s for s in summaries if s.metadata.get("summary_of") != "document"
    }
    grouped: dict[int | None, list[Memory]] = {}
    for chunk in chunks:
        grouped.setdefault(_section(chunk), []).append(chunk)
    indexes = sorted(set(grouped) | set(by_section), key=lambda i: (i is None, i or 0))
    sections = []
    for index in indexes:
        summary = by_section.get(index)
        first = summary if summary is not None else next(iter(grouped.get(index, ())), None)
        meta = first.metadata if first is not None else {}
        heading = str(meta.get("heading") or meta.get("title") or "(no heading)")
        level = meta.get("level")
        sections.append(
            Section(
                index,
                heading,
                level if isinstance(level, int) else 1,
                summary,
                tuple(grouped.get(index, ())),
            )
        )
    return DocumentTree(info, doc_summary, tuple(sections))


def _section(memory: Memory) -> int | None:
    value = memory.metadata.get("section")
    return value if isinstance(value, int) else None


FormBody = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]


@post("/optimize", sync_to_thread=True, opt=FORM_OPT, status_code=200)
def optimize(request: HTMXRequest, data: FormBody, service: Service, caller: CallerDep) -> Template:
    """Fold new rows into the indexes and drop old versions, then show the health again.

    Raises:
        Forbidden: 403, a key that is not an admin's.
    """
    caller.require_admin("optimizing the store")
    service.optimize()
    view = _documents_view(service, None, True, "", True)
    return render(
        request,
        "documents.html",
        "store_health.html",
        chrome=chrome(request, caller, "documents"),
        view=view,
    )
