"""Answers of the agent-tool routes (``/v1/tools/...``) and bodies of ``POST /v1/context``.

The tools' arguments are defined once, for HTTP, OpenAPI and MCP alike, in
:mod:`tribal_memory.interfaces.tool_args`. The answers are the dicts of
:mod:`tribal_memory.interfaces.tools`; the Structs here describe them for
OpenAPI and check them on the way out. Fields with a default are left out of
an answer when they hold it (``fallback`` appears only when search fell back,
``disabled``/``error`` only when it was off).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from tribal_memory.base.validation import MAX_FILTER_VALUES
from tribal_memory.interfaces.tool_args import Scope, Text
from tribal_memory.retrieval.calibration import DEFAULT_MIN_SCORE

Score = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]


# -- memory_search --------------------------------------------------------------------


class MemorySearchResultOut(msgspec.Struct, omit_defaults=True):
    """One hit of ``memory_search``.

    Its virtual ``path`` and 1-based inclusive lines, fused ``score`` in
    [0, 1] (higher is better) and its parts ``vectorScore`` and ``textScore`` (each
    on [0, 1], 0 when that part did not find it), ``snippet`` (its text, at most
    700 characters, then ``Source: <citation>`` when citations are on), ``source``
    and ``corpus`` (always ``memory``), and ``citation`` (``<path>#L<a>-L<b>``,
    ``#L<a>`` for one line; absent when citations are off).
    """

    path: str
    startLine: int
    endLine: int
    score: Score
    vectorScore: Score
    textScore: Score
    snippet: str
    source: Literal["memory"]
    provenance: ProvenanceOut
    corpus: Literal["memory"]
    citation: str | None = None


class ProvenanceOut(msgspec.Struct):
    """Where a result came from (memory-core's shape).

    ``originClass``: ``agent`` (files, captured facts) or ``user`` (a captured
    user turn); ``sessionKind``: the capturing session's kind or ``unknown``;
    ``observedAt``: last update, milliseconds since the epoch.
    """

    originClass: str
    sessionKind: str
    observedAt: int


class SearchDebugOut(msgspec.Struct, omit_defaults=True):
    """How a search ran.

    ``effectiveMode`` (``hybrid``/``vector-only``), ``searchMs`` (server time,
    milliseconds), ``hits`` returned, ``cached`` (the query cache
    answered). On an unavailable answer only ``warning``, ``action``, ``error``.
    """

    backend: str | None = None
    effectiveMode: str | None = None
    searchMs: int | None = None
    hits: int | None = None
    cached: bool | None = None
    warning: str | None = None
    action: str | None = None
    error: str | None = None


class CorpusOutcomeOut(msgspec.Struct):
    """How one requested corpus went (``not-registered``: not held here)."""

    corpus: str
    outcome: str


class MemorySearchOut(msgspec.Struct, omit_defaults=True):
    """The answer of ``memory_search``: hits best first (empty: nothing matched).

    When search is unavailable:
    ``{results: [], disabled: true, unavailable: true, error, warning, action}``.

    ``provider``: ``tribal-memory``. ``model``: the embedding model id.
    ``mode``: ``hybrid``, or ``vector-only`` when BM25 could not run yet.
    ``citations``: the citation mode applied. ``retrievalId``: pass it to
    ``memory_feedback``. ``corpora``: each corpus searched for ``corpus: "all"``
    (or the one not held). ``warning``: a requested corpus this server does not
    hold. ``debug``: how the search ran. ``searchMode``: the search mode that ran (``hybrid``,
    ``title``, ``summary``...); ``modeReason``: why, when ``mode`` was
    ``automatic`` or a title search fell back.
    """

    results: list[MemorySearchResultOut]
    provider: str | None = None
    model: str | None = None
    mode: str | None = None
    citations: str | None = None
    retrievalId: str | None = None
    searchMode: str | None = None
    modeReason: str | None = None
    corpora: list[CorpusOutcomeOut] | None = None
    disabled: bool = False
    unavailable: bool = False
    error: str | None = None
    warning: str | None = None
    action: str | None = None
    debug: SearchDebugOut | None = None


# -- memory_get -------------------------------------------------------------------------


class MemoryGetOut(msgspec.Struct, omit_defaults=True):
    """The answer of ``memory_get``.

    ``status``: ``ok`` (``text`` read), ``not_found`` (unknown or invisible path)
    or ``error`` (``code`` and ``error`` say why). With ``ok``: ``from`` and
    ``lines`` (the lines ``text`` holds); when more follows, ``truncated`` and
    ``nextFrom`` (the line to continue from; absent when one line was cut).
    """

    status: Literal["ok", "not_found", "error"]
    text: str
    path: str
    from_: int | None = msgspec.field(default=None, name="from")
    lines: int | None = None
    truncated: bool = False
    nextFrom: int | None = None
    code: str | None = None
    error: str | None = None


# -- memory_feedback ----------------------------------------------------------------------


class MemoryFeedbackOut(msgspec.Struct):
    """The answer of ``memory_feedback``: what was recorded.

    The paths recognised as used, the paths ignored (not among the
    retrieval's results), the memory ids reported used, whether this repeated
    earlier feedback, and the anchors it activated.
    """

    retrievalId: str
    usedPaths: list[str]
    ignoredPaths: list[str]
    usedIds: list[str]
    duplicate: bool
    anchorsCreated: int


# -- memory_capture ----------------------------------------------------------------------


class MemoryCaptureOut(msgspec.Struct):
    """The answer of ``memory_capture``: the stored memory's id and virtual path.

    ``status`` is ``created`` or ``exists`` (the same text was already stored
    for this owner); ``nearDuplicateOf`` names a very similar memory of the
    owner that was already stored, if any.
    """

    memoryId: str
    path: str
    status: str
    nearDuplicateOf: str | None


# -- knowledge context ------------------------------------------------------------------


class ContextRequest(msgspec.Struct, forbid_unknown_fields=True):
    """A prompt to build a ``<knowledge-graph>`` block for.

    ``agent_id``: the agent (its memories plus shared ones; null: every
    owner). ``top_k`` (>= 1) hits with calibrated score >= ``min_score``;
    ``include_neighbors`` adds related notes; ``max_tokens`` overrides the
    ``context_max_tokens`` setting. ``scope`` (``all``, ``session``,
    ``long-term``) and ``conversation_id`` narrow the hits and notes by
    conversation, ``paths`` to memories whose path matches one of its
    patterns, as for ``memory_search``'s ``scope``, ``conversationId`` and
    ``paths`` (the OpenClaw plugin sends ``long-term``, its session id and
    the files memory-core serves).
    """

    prompt: str
    agent_id: str | None = None
    top_k: int = 3
    min_score: Score = DEFAULT_MIN_SCORE
    include_neighbors: bool = True
    max_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    scope: Scope | None = None
    conversation_id: Text | None = None
    paths: Annotated[list[Text], msgspec.Meta(max_length=MAX_FILTER_VALUES)] | None = None


class ContextItemOut(msgspec.Struct):
    """A memory in the knowledge block.

    Label, title, owner, virtual path and lines, ``score`` in [0, 1] for hits
    (null for neighbours), and ``via`` for neighbours (a relation type,
    ``same_document`` or ``tag:<name>``; null for hits).
    """

    memory_id: str
    label: str
    title: str
    owner: str
    path: str
    start_line: int
    end_line: int
    score: float | None
    via: str | None


class ContextOut(msgspec.Struct):
    """The answer of ``POST /v1/context``.

    The block (``""`` when skipped: ``skipped_reason`` is ``prompt_too_short``,
    ``already_injected``, ``no_match`` or ``budget_too_small``), the
    ``retrieval_id`` to send feedback for (null when no search ran), the hits
    and neighbours shown, and the block's size in tokens.
    """

    context: str
    skipped_reason: str | None
    retrieval_id: str | None
    hits: list[ContextItemOut]
    neighbors: list[ContextItemOut]
    tokens: int


# -- memory_graph ---------------------------------------------------------------------


class GraphMemoryOut(msgspec.Struct, omit_defaults=True):
    """One memory ``memory_graph`` found.

    Its id, virtual ``path`` (``memory_get`` reads it), ``snippet`` (its text, at
    most 700 characters), owner and kind. ``steps``: neighbors, its hop count;
    intersection, its hop counts from each id in order. ``via``: neighbors, the
    relation type that reached it. ``score``: search, in [0, 1], higher is better.
    """

    memoryId: str
    path: str
    snippet: str
    owner: str
    kind: str
    steps: int | list[int] | None = None
    via: str | None = None
    score: Score | None = None


class MemoryGraphOut(msgspec.Struct):
    """The operation run and the memories it found (nearest or best first; empty: none)."""

    operation: str
    memories: list[GraphMemoryOut]


# -- memory_list, memory_update, memory_delete -----------------------------------------


class MemoryListItemOut(msgspec.Struct):
    """One of the caller's memories.

    ``path`` (``memory/<id>.md``), ``memoryId``, the start of its ``text`` (300
    characters), ``tags``, ``createdAt``/``updatedAt`` (RFC 3339).
    """

    path: str
    memoryId: str
    text: str
    tags: list[str]
    createdAt: str
    updatedAt: str


class MemoryListOut(msgspec.Struct):
    """A page of the caller's memories; ``nextAfter``: pass as ``after`` (null: last page)."""

    memories: list[MemoryListItemOut]
    nextAfter: str | None


class MemoryChangeOut(msgspec.Struct, omit_defaults=True):
    """What ``memory_update`` or ``memory_delete`` did.

    ``status``: ``updated``, ``deleted`` or ``not_found`` (no memory of the caller at
    ``path``). ``memoryId``: the memory's id (it stays when the text changes).
    """

    status: Literal["updated", "deleted", "not_found"]
    path: str
    memoryId: str | None = None
