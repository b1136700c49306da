"""Memories pages: browse with filters, one memory with what is known of it, edit, delete."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote

from litestar import Controller, get, post
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath, FromQuery
from litestar.plugins.htmx import ClientRedirect, HTMXRequest
from litestar.response import Redirect, Response, Template

from tribal_memory.base.graph import Neighbor, Relation
from tribal_memory.base.models import MEMORY_KINDS, Memory, MemoryPatch, SearchFilters
from tribal_memory.base.results import Anchor
from tribal_memory.interfaces.api.auth import CallerDep, OwnerScope
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.dashboard.common import (
    FORM_OPT,
    blank,
    chrome,
    parse_day,
    parse_int,
    render,
    split_tags,
)
from tribal_memory.learned.history import MemoryHistory
from tribal_memory.service.memory_service import MemoryService

PAGE_SIZE = 50
"""Memories per page of the list."""

FormBody = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]


@dataclass(frozen=True, slots=True)
class MemoryFilters:
    """The list's filter form as sent (blank fields are empty strings)."""

    owner: str = ""
    kind: str = ""
    tag: str = ""
    source: str = ""
    since: str = ""
    until: str = ""


@dataclass(frozen=True, slots=True)
class MemoryList:
    """One page of the list: the memories, the filters and the next page's ``after``."""

    memories: tuple[Memory, ...]
    filters: MemoryFilters
    kinds: tuple[str, ...]
    next_after: str | None


@dataclass(frozen=True, slots=True)
class MemoryDetail:
    """One memory with its relations, anchors and learned history; ``owner`` the view's scope."""

    memory: Memory
    relations: tuple[Relation, ...]
    anchors: tuple[Anchor, ...]
    history: MemoryHistory
    owner: str


class MemoryPages(Controller):
    """``/ui/memories``: the list, one memory, its edit form and its deletion."""

    path = "/memories"

    @get("/", sync_to_thread=True)
    def list_page(
        self,
        request: HTMXRequest,
        service: Service,
        caller: CallerDep,
        owner_scope: OwnerScope,
        kind: FromQuery[str | None] = None,
        tag: FromQuery[str | None] = None,
        source: FromQuery[str | None] = None,
        since: FromQuery[str | None] = None,
        until: FromQuery[str | None] = None,
        after: FromQuery[str | None] = None,
    ) -> Template:
        """Memories passing the filters, one page by id; htmx swaps only the rows."""
        kind, tag, source = blank(kind), blank(tag), blank(source)
        filters = SearchFilters(
            owner=owner_scope,
            tags=(tag,) if tag else (),
            kinds=(kind,) if kind else (),
            sources=(source,) if source else (),
            since=parse_day(since),
            until=parse_day(until, end=True),
        )
        page = service.list_page(filters, limit=PAGE_SIZE, after=blank(after))
        form = MemoryFilters(
            owner=request.query_params.get("owner", ""),
            kind=kind or "",
            tag=tag or "",
            source=source or "",
            since=since or "",
            until=until or "",
        )
        view = MemoryList(tuple(page.memories), form, MEMORY_KINDS, page.next_after)
        return render(
            request,
            "memories.html",
            "memory_rows.html",
            chrome=chrome(request, caller, "memories"),
            view=view,
        )

    @get("/{memory_id:str}", sync_to_thread=True)
    def detail(
        self,
        request: HTMXRequest,
        memory_id: FromPath[str],
        service: Service,
        caller: CallerDep,
        owner_scope: OwnerScope,
    ) -> Template:
        """One memory, its relations, anchors, feedback and the retrievals that returned it."""
        view = _detail(service, memory_id, owner_scope)
        return render(
            request,
            "memory.html",
            "memory_detail.html",
            chrome=chrome(request, caller, "memories"),
            view=view,
        )

    @get("/{memory_id:str}/edit", sync_to_thread=True)
    def edit_form(
        self, memory_id: FromPath[str], service: Service, caller: CallerDep, owner_scope: OwnerScope
    ) -> Template:
        """The edit form of a memory (a fragment swapped into its page)."""
        memory = service.get(memory_id, owner=owner_scope)
        return Template(
            template_name="partials/memory_edit.html",
            context={"memory": memory, "kinds": MEMORY_KINDS, "owner": owner_scope or ""},
        )

    @post("/{memory_id:str}/edit", sync_to_thread=True, opt=FORM_OPT, status_code=200)
    def edit(
        self,
        request: HTMXRequest,
        memory_id: FromPath[str],
        data: FormBody,
        service: Service,
        caller: CallerDep,
        owner_scope: OwnerScope,
    ) -> Response[Any]:
        """Apply the form (content, kind, tags, source); new content gives a new id.

        Raises what :meth:`MemoryService.update` raises (shown as an error page).
        """
        patch = MemoryPatch(
            content=data.get("content"),
            tags=split_tags(data.get("tags")),
            kind=blank(data.get("kind")),  # type: ignore[arg-type]
            source=blank(data.get("source")),
        )
        memory = service.update(
            memory_id,
            patch,
            owner=owner_scope,
            if_version=blank(data.get("version")),
            shared_writable=caller.admin,
        )
        target = _memory_url(memory.memory_id, owner_scope)
        if request.htmx:
            return ClientRedirect(target)
        return Redirect(target, status_code=303)

    @get("/{memory_id:str}/delete", sync_to_thread=True)
    def delete_confirm(
        self,
        request: HTMXRequest,
        memory_id: FromPath[str],
        service: Service,
        caller: CallerDep,
        owner_scope: OwnerScope,
    ) -> Template:
        """Ask before deleting: what goes with the memory, and a button that deletes it."""
        memory = service.get(memory_id, owner=owner_scope)
        return render(
            request,
            "memory_delete.html",
            "memory_delete.html",
            chrome=chrome(request, caller, "memories"),
            memory=memory,
            owner=owner_scope or "",
        )

    @post("/{memory_id:str}/delete", sync_to_thread=True, opt=FORM_OPT, status_code=200)
    def delete(
        self,
        request: HTMXRequest,
        memory_id: FromPath[str],
        data: FormBody,
        service: Service,
        caller: CallerDep,
        owner_scope: OwnerScope,
    ) -> Response[Any]:
        """Delete the memory with its relations and learned data, then show the list."""
        service.delete(
            memory_id,
            owner=owner_scope,
            if_version=blank(data.get("version")),
            shared_writable=caller.admin,
        )
        target = "/ui/memories" + (f"?owner={quote(owner_scope)}" if owner_scope else "")
        if request.htmx:
            return ClientRedirect(target)
        return Redirect(target, status_code=303)

    @get("/{memory_id:str}/neighbors", sync_to_thread=True)
    def neighbours(
        self,
        memory_id: FromPath[str],
        service: Service,
        owner_scope: OwnerScope,
        steps: FromQuery[str | None] = None,
    ) -> Template:
        """The memory's graph neighbourhood (a fragment): memories within ``steps`` hops."""
        found: list[Neighbor] = service.neighbors(
            memory_id, steps=parse_int(steps, "steps", 2), owner=owner_scope
        )
        return Template(
            template_name="partials/neighbors.html",
            context={"memory_id": memory_id, "neighbors": found, "owner": owner_scope or ""},
        )


def _memory_url(memory_id: str, owner: str | None) -> str:
    return f"/ui/memories/{quote(memory_id)}" + (f"?owner={quote(owner)}" if owner else "")


def _detail(service: MemoryService, memory_id: str, owner: str | None) -> MemoryDetail:
    memory = service.get(memory_id, owner=owner)
    return MemoryDetail(
        memory=memory,
        relations=tuple(service.relations(memory_id, owner=owner)),
        anchors=tuple(service.anchors(memory_id, owner=owner)),
        history=service.memory_history(memory_id, owner=owner, limit=50),
        owner=owner or "",
    )
