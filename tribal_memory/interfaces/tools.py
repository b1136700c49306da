"""Agent tools: the OpenClaw memory-slot tools plus ``memory_capture``, transport-free.

Each tool takes its arguments parsed into their Struct (defined once, in
:mod:`tribal_memory.interfaces.tool_args`) and the caller's owner, and returns a
plain JSON-able dict in the tool's wire shape. The HTTP routes under
``/v1/tools/`` call the tools with the body Litestar decoded into that Struct;
the MCP server calls :func:`call_tool`, which parses a call's raw arguments
into it; so they answer alike.

Shapes (numbers may arrive as floats: ``6.0`` is 6). They follow OpenClaw's
memory-core tools (2026.9.6) field for field where the agent reads them;
``retrievalId`` is the one addition.

``memory_search {query, maxResults=6, minScore=0.02, corpus?, citations?,
scope?, conversationId?, paths?}`` →
``{results: [{path, startLine, endLine, score, vectorScore, textScore,
snippet, source: "memory", provenance, corpus: "memory", citation?}],
provider, model, mode, citations, retrievalId, corpora?, debug}``
(``provenance`` and ``debug``: :func:`provenance`, and ``{backend,
effectiveMode, searchMs, hits, cached}``; ``corpora`` for ``corpus: "all"``).
``score`` is the hit's fused hybrid score in [0, 1], higher is better;
``vectorScore`` and ``textScore`` its two parts on [0, 1] (0 when that part
did not find it). Hits under ``minScore`` are
dropped; a ``minScore`` outside [0, 1] is clamped to it; ``maxResults`` above
the ``max_k`` setting is capped to it. ``snippet`` is the memory's text cut
to :data:`SNIPPET_MAX_CHARS`. ``citations`` (``auto``, ``on`` or ``off``;
``auto`` counts as on: the caller decides per chat) adds ``citation``
(``<path>#L<a>-L<b>``, ``#L<a>`` for one line) and a ``Source: <citation>``
line at the end of the snippet. ``mode`` is ``hybrid``, or ``vector-only``
when BM25 could not run yet (too few memories). ``corpus``: ``memory`` and
``all`` search the memories; ``wiki`` answers no results with a warning that
no wiki corpus is registered; ``sessions`` answers unavailable (no session
transcripts are held). When the store or the model fails the answer is
memory-core's unavailable shape, ``{results: [], disabled: true, unavailable:
true, error, warning, action}``, instead of an error. ``scope`` (``all``,
``session``, ``long-term``) with ``conversationId`` and ``paths`` narrow the
search before ranking (:func:`~tribal_memory.interfaces.tool_args.scope_filters`).

``memory_get {path, from?, lines?, corpus?}`` → ``{status: "ok", text, path,
from, lines, truncated?, nextFrom?}``: at most :data:`READ_DEFAULT_LINES`
lines from ``from`` (1-based, default 1) unless ``lines`` says otherwise, cut
at whole lines to :data:`READ_MAX_CHARS` characters; when more follows,
``truncated: true``, ``nextFrom`` (the next line to read) and a continuation
notice at the end of ``text``. ``path`` comes back normalised (``./a//b.md``
is ``a/b.md``). An unknown path, one the caller cannot see, or ``corpus:
"wiki"`` gives ``{status: "not_found", text: "", path}``; a path escaping the
workspace (``../x``) or a failed store ``{status: "error", text: "", path,
code, error}``.

``memory_feedback {retrievalId, usedPaths}`` → ``{retrievalId, usedPaths,
ignoredPaths, usedIds, duplicate, anchorsCreated}``: the paths are mapped to
the memories of that retrieval's results that have those paths, and reported
as used through the learned layer.

``memory_capture {content, tags?, source?}`` → ``{memoryId, path, status,
nearDuplicateOf}``: stores a fact owned by the caller (``shared`` when the
caller is anonymous).

Paths are virtual. A memory's path is ``memory/<memory_id>.md`` and its lines
are the lines of its content. A chunk of an ingested document (kind
``chunk`` with a ``source`` and ``start_line``/``end_line`` in its metadata,
1-based and inclusive) has the document's path (its ``source``) and those
lines; ``memory_get`` of a document path reassembles the document from the
chunks the caller can see (:func:`document_lines`).

``memory_search``, ``memory_feedback``, ``memory_capture`` and :func:`call_tool`
live here; the paths and citations in :mod:`tribal_memory.interfaces.tool_paths`,
``memory_get`` and the reassembly of documents in
:mod:`tribal_memory.interfaces.tool_read`. Their public names are importable
from this module too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from tribal_memory.base.errors import EmbeddingError, InvalidInput, StoreUnavailable
from tribal_memory.base.models import SHARED_OWNER, Memory, MemoryInput
from tribal_memory.base.results import Hit
from tribal_memory.interfaces.tool_args import (
    MemoryCaptureIn,
    MemoryFeedbackIn,
    MemoryGetIn,
    MemorySearchIn,
    count,
    parse,
    scope_filters,
)
from tribal_memory.interfaces.tool_paths import (
    MEMORY_DIR,
    citation,
    line_span,
    memory_path,
    normalize_path,
    split_citation,
)
from tribal_memory.interfaces.tool_read import (
    MAX_DOCUMENT_CHUNKS,
    READ_DEFAULT_LINES,
    READ_MAX_CHARS,
    document_lines,
    memory_get,
    read_window,
)
from tribal_memory.retrieval.calibration import DEFAULT_TOOL_MIN_SCORE
from tribal_memory.service.memory_service import MemoryService

SNIPPET_MAX_CHARS = 700
"""Longest snippet returned by ``memory_search``, in characters (as OpenClaw's memory-core)."""
DEFAULT_MAX_RESULTS = 6
"""``maxResults`` when the call leaves it out (OpenClaw's default)."""
DEFAULT_MIN_SCORE = DEFAULT_TOOL_MIN_SCORE
"""``minScore`` when the call leaves it out: the calibrated default of
:mod:`tribal_memory.retrieval.calibration` (scores are calibrated relevance,
not memory-core's scale)."""
PROVIDER = "tribal-memory"
"""The ``provider`` reported by ``memory_search``."""
TOOL_NAMES: tuple[str, ...] = ("memory_search", "memory_get", "memory_feedback", "memory_capture")
"""The tools :func:`call_tool` serves."""

__all__ = [
    "DEFAULT_MAX_RESULTS",
    "DEFAULT_MIN_SCORE",
    "MAX_DOCUMENT_CHUNKS",
    "MEMORY_DIR",
    "PROVIDER",
    "READ_DEFAULT_LINES",
    "READ_MAX_CHARS",
    "SNIPPET_MAX_CHARS",
    "TOOL_NAMES",
    "call_tool",
    "capture_answer",
    "citation",
    "document_lines",
    "line_span",
    "memory_capture",
    "memory_feedback",
    "memory_get",
    "memory_path",
    "memory_search",
    "normalize_path",
    "provenance",
    "read_window",
    "split_citation",
    "unavailable_answer",
]


def memory_search(
    service: MemoryService,
    args: MemorySearchIn,
    *,
    owner: str | None,
    learner: str | None = None,
) -> dict[str, Any]:
    """Hybrid search logged for feedback (see the module docstring for the shape).

    Args:
        service: The open service.
        args: The parsed arguments (``sessionId``: the agent task, see
            ``memory_feedback``).
        owner: The caller: its memories plus shared ones (None: every owner).
        learner: Whose learned data the search uses and feeds (None: ``owner``).

    Returns:
        The search answer; memory-core's unavailable answer when the store or
        the embedding model failed, or when ``corpus`` is ``sessions``.

    Raises:
        InvalidInput: an empty query, ``scope: "session"`` without ``conversationId``.
        TooLarge: a query over ``max_content_chars``.
    """
    query = args.query
    max_results = count(args.maxResults, DEFAULT_MAX_RESULTS)
    min_score = DEFAULT_MIN_SCORE if args.minScore is None else min(1.0, max(0.0, args.minScore))
    corpus = args.corpus
    mode = args.citations or "auto"
    if corpus == "sessions":
        return unavailable_answer(
            "session transcripts are not held by tribal-memory",
            warning="Session transcript search is unavailable: tribal-memory holds memories "
            "and documents, not session transcripts.",
            action="Search without corpus=sessions, or use the session history tools.",
        )
    if corpus == "wiki":
        return {
            "results": [],
            "citations": mode,
            "corpora": [{"corpus": "wiki", "outcome": "not-registered"}],
            "warning": "No wiki corpus is registered with tribal-memory; "
            "results do not cover that requested corpus.",
        }
    k = min(max_results, service.settings.max_k)
    filters = scope_filters(owner, args.scope, args.conversationId, args.paths)
    session_id = args.sessionId
    started = time.perf_counter()
    try:
        result = service.recall_with_feedback(
            query,
            k=k,
            filters=filters,
            mode=args.mode or "hybrid",
            min_score=min_score,
            learner=learner,
            session_id=session_id,
        )
    except (StoreUnavailable, EmbeddingError) as exc:
        return unavailable_answer(exc.detail)
    effective = "vector-only" if result.fallback is not None else "hybrid"
    answer: dict[str, Any] = {
        "results": [_search_result(hit, cite=mode != "off") for hit in result.hits],
        "provider": PROVIDER,
        "model": service.embedder.model_id,
        "mode": effective,
        "citations": mode,
        "retrievalId": result.retrieval_id,
    }
    if corpus == "all":  # memory-core lists each corpus it was asked to search
        answer["corpora"] = [
            {"corpus": "memory", "outcome": "ok"},
            {"corpus": "wiki", "outcome": "not-registered"},
        ]
    answer["debug"] = {
        "backend": PROVIDER,
        "effectiveMode": effective,
        "searchMs": round((time.perf_counter() - started) * 1000),
        "hits": len(result.hits),
        "cached": result.cached,
    }
    if args.mode is not None:  # memory-core's answer unchanged unless a mode was asked for
        answer |= {"searchMode": result.mode, "modeReason": result.mode_reason}
    return answer


def _search_result(hit: Hit, *, cite: bool) -> dict[str, Any]:
    """One ``memory_search`` result for a hit (with its citation when ``cite``)."""
    path = memory_path(hit.memory)
    start, end = line_span(hit.memory)
    snippet = hit.memory.content[:SNIPPET_MAX_CHARS]
    result: dict[str, Any] = {
        "path": path,
        "startLine": start,
        "endLine": end,
        "score": _unit(hit.score),
        "vectorScore": _unit(hit.vector_score or 0.0),
        "textScore": _unit(hit.text_score or 0.0),
        "snippet": snippet,
        "source": "memory",
        "provenance": provenance(hit.memory),
        "corpus": "memory",
    }
    if cite:
        result["citation"] = citation(path, start, end)
        result["snippet"] = f"{snippet.rstrip()}\n\nSource: {result['citation']}"
    return result


def provenance(memory: Memory) -> dict[str, Any]:
    """memory-core's ``provenance`` of a result: who wrote it, in what session, when.

    Returns:
        ``{originClass, sessionKind, observedAt}``: ``originClass`` is ``agent``
        (workspace files and captured facts) or the ``originClass`` a capture
        stored in the memory's metadata (conversation turns: ``user`` or
        ``agent``); ``sessionKind`` the stored ``sessionKind`` or ``unknown``;
        ``observedAt`` the memory's last update, in milliseconds since the epoch.
    """
    origin = memory.metadata.get("originClass")
    kind = memory.metadata.get("sessionKind")
    return {
        "originClass": origin if isinstance(origin, str) and origin else "agent",
        "sessionKind": kind if isinstance(kind, str) and kind else "unknown",
        "observedAt": int(memory.updated_at.timestamp() * 1000),
    }


def _unit(value: float) -> float:
    return min(1.0, max(0.0, float(value)))


def unavailable_answer(
    error: str,
    *,
    warning: str = "Memory search is unavailable: the tribal-memory store or its "
    "embedding model failed.",
    action: str = "Check the tribal-memory server (its log and GET /health), then retry "
    "memory_search.",
) -> dict[str, Any]:
    """memory-core's answer when memory cannot be searched: no results, and why.

    Returns:
        ``{results: [], disabled: true, unavailable: true, error, warning, action,
        debug: {warning, action, error}}``.
    """
    return {
        "results": [],
        "disabled": True,
        "unavailable": True,
        "error": error,
        "warning": warning,
        "action": action,
        "debug": {"warning": warning, "action": action, "error": error},
    }


def memory_feedback(
    service: MemoryService,
    args: MemoryFeedbackIn,
    *,
    owner: str | None,
    learner: str | None = None,
) -> dict[str, Any]:
    """Report which results of a ``memory_search`` the agent used, by path.

    A path counts for the results of this retrieval that came from it (a
    document path covers its chunks this retrieval showed); only when it
    showed none, for those of the other retrievals of its session. A
    citation (``p#L1-L2``, as ``Source:`` lines print them) counts for the
    results of ``p`` whose lines overlap it, and for none when none does, so
    an agent that cites the section it used credits that section alone. The
    other results count as retrieved but unused. Paths that name no result
    are ignored and listed in ``ignoredPaths``, unless none of the given
    paths matches: then nothing is recorded and the call is an error, so
    that a wrong path is not taken for "nothing was useful". ``usedPaths:
    []`` records that nothing was useful.

    Args:
        service: The memory service the retrieval was logged in.
        args: The parsed arguments.
        owner: The caller's scope (None: any retrieval).
        learner: The owner the retrieval must have been logged for (None: ``owner``).

    Returns:
        ``{retrievalId, usedPaths, ignoredPaths, usedIds, duplicate, anchorsCreated}``.

    Raises:
        NotFound: unknown ``retrievalId`` (or another owner's).
        InvalidInput: paths given and none among the results.
        Conflict: the retrieval already has feedback naming other memories.
    """
    retrieval_id = args.retrievalId
    given = args.usedPaths
    event = service.retrieval(retrieval_id, owner=learner if learner is not None else owner)
    candidates = service.session_memory_ids(event)
    memories = service.get_many(candidates, owner=owner)
    by_path: dict[str, list[Memory]] = {}
    for memory_id in candidates:
        if memory_id in memories:
            by_path.setdefault(memory_path(memories[memory_id]), []).append(memories[memory_id])
    used_paths: list[str] = []
    ignored: list[str] = []
    used_ids: list[str] = []
    shown = set(event.result_ids)
    for raw in given:
        path, span = split_citation(raw)
        path = normalize_path(path) or path
        found = by_path.get(path, [])
        own = [m for m in found if m.memory_id in shown]
        cited = _cited(own or found, span)
        if not cited:
            ignored.append(path)
            continue
        used_paths.append(path)
        used_ids += [m.memory_id for m in cited]
    if given and not used_paths:
        raise InvalidInput(
            f"none of the paths {given} is among the results of retrieval {retrieval_id}"
        )
    used_ids = list(dict.fromkeys(used_ids))
    result = service.record_usage_feedback(retrieval_id, used_ids, owner=owner)
    return {
        "retrievalId": retrieval_id,
        "usedPaths": list(dict.fromkeys(used_paths)),
        "ignoredPaths": list(dict.fromkeys(ignored)),
        "usedIds": list(result.used),
        "duplicate": result.duplicate,
        "anchorsCreated": result.anchors_created,
    }


def _cited(hits: Sequence[Memory], span: tuple[int, int] | None) -> list[Memory]:
    """The hits a citation names: those whose lines overlap ``span`` (all without one)."""
    if span is None:
        return list(hits)
    return [m for m in hits if line_span(m)[0] <= span[1] and span[0] <= line_span(m)[1]]


def capture_answer(memory_id: str, status: str, near_duplicate_of: str | None) -> dict[str, Any]:
    """The ``memory_capture`` answer for a stored (or already stored) memory."""
    return {
        "memoryId": memory_id,
        "path": f"{MEMORY_DIR}{memory_id}.md",
        "status": status,
        "nearDuplicateOf": near_duplicate_of,
    }


def memory_capture(
    service: MemoryService, args: MemoryCaptureIn, *, owner: str | None
) -> dict[str, Any]:
    """Store a fact for the caller (idempotent: the same text twice is stored once).

    Args:
        service: The memory service written to.
        args: The parsed arguments.
        owner: The memory's owner (None: ``shared``).

    Returns:
        ``{memoryId, path, status ("created" | "exists"), nearDuplicateOf}``.

    Raises:
        InvalidInput: empty content or a bad tag. TooLarge: content over
        ``max_content_chars``. StoreUnavailable / EmbeddingError: not stored.
    """
    item = MemoryInput(
        content=args.content,
        owner=owner or SHARED_OWNER,
        tags=tuple(args.tags or ()),
        source=args.source,
    )
    result = service.capture(item)
    return capture_answer(result.memory.memory_id, result.status, result.near_duplicate_of)


def call_tool(
    service: MemoryService,
    name: str,
    arguments: Mapping[str, Any] | None,
    *,
    owner: str | None,
) -> dict[str, Any]:
    """Run the tool ``name`` (one of :data:`TOOL_NAMES`) for ``owner``.

    ``arguments``: the call's raw arguments, parsed into the tool's Struct
    (:mod:`tribal_memory.interfaces.tool_args`).

    Raises:
        InvalidInput: an unknown tool or bad arguments; otherwise what the tool raises.
    """
    if name == "memory_search":
        return memory_search(service, parse(MemorySearchIn, arguments), owner=owner)
    if name == "memory_get":
        return memory_get(service, parse(MemoryGetIn, arguments), owner=owner)
    if name == "memory_feedback":
        return memory_feedback(service, parse(MemoryFeedbackIn, arguments), owner=owner)
    if name == "memory_capture":
        return memory_capture(service, parse(MemoryCaptureIn, arguments), owner=owner)
    raise InvalidInput(f"unknown tool {name!r}; known: {', '.join(TOOL_NAMES)}")
