"""Search playground: one query as an owner, in any mode, learned and plain side by side."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import get_args

from litestar import get
from litestar.params import FromQuery
from litestar.plugins.htmx import HTMXRequest
from litestar.response import Template

from tribal_memory.base.models import SearchFilters
from tribal_memory.base.results import LearnedParts, SearchMode, SearchResult
from tribal_memory.interfaces.api.auth import CallerDep, OwnerScope
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.dashboard.common import blank, chrome, parse_int, render

MODES: tuple[str, ...] = get_args(SearchMode)


@dataclass(frozen=True, slots=True)
class SearchForm:
    """The playground's form as sent."""

    query: str
    owner: str
    mode: str
    k: int


@dataclass(frozen=True, slots=True)
class Playground:
    """The form and, once a query ran, the learned and plain results of it.

    ``learned_parts``: the parts the learned column used (the server's
    configured ones). ``moved``: memory id -> plain rank minus learned rank
    (positive: learning raised it), for hits in both columns.
    """

    form: SearchForm
    modes: tuple[str, ...]
    learned: SearchResult | None
    plain: SearchResult | None
    learned_parts: tuple[str, ...]
    moved: dict[str, int]


@get("/search", sync_to_thread=True)
def search_page(
    request: HTMXRequest,
    service: Service,
    caller: CallerDep,
    owner_scope: OwnerScope,
    q: FromQuery[str | None] = None,
    mode: FromQuery[str | None] = None,
    k: FromQuery[str | None] = None,
) -> Template:
    """The playground; with a query ``q``, the search run twice (learned parts on, then off).

    Neither run is logged as a retrieval, so looking does not teach anything.

    Raises what :meth:`MemoryService.search` raises (an error page).
    """
    form = SearchForm(
        query=q or "",
        owner=request.query_params.get("owner", ""),
        mode=blank(mode) or "hybrid",
        k=parse_int(k, "k", 10),
    )
    learned = plain = None
    parts = service.settings.learned_parts
    moved: dict[str, int] = {}
    if blank(q) is not None:
        filters = SearchFilters(owner=owner_scope)
        run = functools.partial(
            service.search,
            form.query,
            k=form.k,
            filters=filters,
            mode=form.mode,  # type: ignore[arg-type]  # checked by the service (400)
            learner=caller.learner,
        )
        learned, plain = run(learned=parts), run(learned=LearnedParts.none())
        plain_rank = {h.memory.memory_id: h.rank for h in plain.hits}
        moved = {
            h.memory.memory_id: plain_rank[h.memory.memory_id] - h.rank
            for h in learned.hits
            if h.memory.memory_id in plain_rank
        }
    view = Playground(form, MODES, learned, plain, parts.names, moved)
    return render(
        request,
        "search.html",
        "search_results.html",
        chrome=chrome(request, caller, "search"),
        view=view,
    )
