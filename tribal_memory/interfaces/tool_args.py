"""The agent tools' arguments: one msgspec Struct per tool, their only definition.

The HTTP routes under ``/v1/tools/`` decode their bodies into these Structs
(and Litestar's OpenAPI describes them from them), the MCP server lists
:func:`input_schema` of each as the tool's input schema and turns a call's
arguments into one with :func:`parse`; :mod:`tribal_memory.interfaces.tools`
and :mod:`tribal_memory.interfaces.graph_tool` take the parsed Struct.

They follow OpenClaw's memory-core tools: camelCase names, numbers that may
arrive as floats (a count is floored: ``6.0`` and ``6.7`` are 6), unknown
fields ignored (OpenClaw sends ``corpus``, for one), and ``null`` taken as
leaving a field out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

import msgspec

from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.graph import MAX_STEPS
from tribal_memory.base.models import SearchFilters
from tribal_memory.base.validation import MAX_FILTER_VALUES, MAX_IDS, MAX_SOURCE_CHARS

Count = Annotated[float, msgspec.Meta(ge=1)]
"""A whole number >= 1 that may arrive as a float (floored by :func:`count`)."""


Text = Annotated[str, msgspec.Meta(max_length=MAX_SOURCE_CHARS)]
"""A path, id, tag or name: at most 1,024 characters."""


Scope = Literal["all", "session", "long-term"]
"""Which memories a search covers, by conversation (see :func:`scope_filters`)."""


def _text(description: str) -> msgspec.Meta:
    return msgspec.Meta(description=description)


def _list(most: int, description: str) -> msgspec.Meta:
    return msgspec.Meta(max_length=most, description=description)


class ToolArgs(msgspec.Struct):
    """Base of the tools' arguments: every number given must be finite."""

    def __post_init__(self) -> None:
        """Refuse NaN and infinities (MCP clients may send them; JSON cannot).

        Raises:
            ValueError: a field holds a non-finite float (reported by msgspec
                as a validation error naming the field).
        """
        for name in self.__struct_fields__:
            value = getattr(self, name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{_wire_name(type(self), name)} must be a finite number")


def _wire_name(kind: type[msgspec.Struct], name: str) -> str:
    return kind.__struct_encode_fields__[kind.__struct_fields__.index(name)]


def count(value: float | None, default: int) -> int:
    """A :data:`Count` as an int (floored); ``default`` when it was left out."""
    return default if value is None else math.floor(value)


class MemorySearchIn(ToolArgs):
    """The arguments of ``memory_search``.

    ``maxResults`` is capped at the ``max_k`` setting; a ``minScore`` outside
    [0, 1] is clamped to it. ``scope`` and ``paths``: see :func:`scope_filters`.
    """

    query: Annotated[str, _text("What to look for.")]
    maxResults: Annotated[Count, _text("Most results (default 6).")] | None = None
    minScore: (
        Annotated[float, _text("Least score of a result, in [0, 1] (default 0.02).")] | None
    ) = None
    corpus: (
        Annotated[
            Literal["memory", "wiki", "all", "sessions"],
            _text(
                "memory (the default) or all: memories and documents; wiki and sessions "
                "are not held here."
            ),
        ]
        | None
    ) = None
    citations: (
        Annotated[
            Literal["auto", "on", "off"],
            _text("Add a citation to each result (auto, the default, counts as on)."),
        ]
        | None
    ) = None
    sessionId: (
        Annotated[
            str,
            _text(
                "The task this search belongs to: memory_feedback on any search of the task "
                "may name paths another search of it returned."
            ),
        ]
        | None
    ) = None
    scope: (
        Annotated[
            Scope,
            _text(
                "all (the default); session: only the turns captured in the current "
                "conversation (conversationId); long-term: everything else (facts, documents, "
                "earlier conversations)."
            ),
        ]
        | None
    ) = None
    conversationId: (
        Annotated[
            Text,
            _text(
                "The current conversation, as its turns were captured (their doc_id; the "
                "OpenClaw plugin sends the session id). Needed by scope session."
            ),
        ]
        | None
    ) = None
    paths: (
        Annotated[
            list[Text],
            _list(
                MAX_FILTER_VALUES,
                "Only results whose path matches one of these patterns (* matches any "
                "characters, / included; a memory's path is memory/<id>.md).",
            ),
        ]
        | None
    ) = None
    mode: (
        Annotated[
            Literal["hybrid", "vector", "text", "hybrid_expanded", "title", "summary", "automatic"],
            _text(
                "Ranking (default hybrid): title matches section titles and returns their "
                "summaries and best chunks, summary searches section and document summaries, "
                "automatic picks one from the question and says why (modeReason)."
            ),
        ]
        | None
    ) = None


class MemoryGetIn(ToolArgs):
    """The arguments of ``memory_get``: ``lines`` lines from line ``from`` of ``path``."""

    path: Annotated[str, _text("A path from memory_search.")]
    from_: Annotated[Count, _text("First line (1-based).")] | None = msgspec.field(
        default=None, name="from"
    )
    lines: Annotated[Count, _text("How many lines (default 120).")] | None = None
    corpus: Literal["memory", "wiki", "all"] | None = None


class MemoryFeedbackIn(ToolArgs):
    """The arguments of ``memory_feedback``: the results of a retrieval the agent used."""

    retrievalId: Annotated[str, _text("From memory_search.")]
    usedPaths: Annotated[
        list[Text],
        _list(
            MAX_IDS,
            "Citations (path#La-Lb) of the results you used, or their paths; [] when none helped.",
        ),
    ]


class MemoryCaptureIn(ToolArgs):
    """The arguments of ``memory_capture``: a fact for the caller to keep."""

    content: Annotated[str, _text("The fact to remember.")]
    tags: (
        Annotated[
            list[Text], _list(MAX_FILTER_VALUES, "Optional labels, e.g. decision, preference.")
        ]
        | None
    ) = None
    source: Annotated[Text, _text("Where it came from (optional).")] | None = None


class MemoryGraphIn(ToolArgs):
    """The arguments of ``memory_graph``.

    ``maxResults`` is capped at the ``max_k`` setting; ``query`` is needed by
    (and only used by) ``search``.
    """

    operation: Literal["neighbors", "intersection", "search"]
    ids: Annotated[
        list[Text],
        msgspec.Meta(
            min_length=1,
            max_length=MAX_IDS,
            description="Memory ids: one (neighbors, search) or 2 to 16 (intersection).",
        ),
    ]
    steps: (
        Annotated[
            float,
            msgspec.Meta(ge=1, le=MAX_STEPS, description="Most hops over relations (default 1)."),
        ]
        | None
    ) = None
    types: (
        Annotated[
            list[Text],
            _list(MAX_FILTER_VALUES, "Follow only relations of these types (default: all)."),
        ]
        | None
    ) = None
    block: (
        Annotated[
            list[Text],
            _list(MAX_FILTER_VALUES, "Relation types and memory kinds never passed through."),
        ]
        | None
    ) = None
    query: Annotated[str, _text("What to look for (search only).")] | None = None
    maxResults: Annotated[Count, _text("Most memories (default 10).")] | None = None


def scope_filters(
    owner: str | None,
    scope: Scope | None,
    conversation_id: str | None,
    paths: list[str] | None = None,
) -> SearchFilters:
    """The prefilter of a tool search for ``owner`` under ``scope`` and ``paths``.

    A conversation's turns are captured with the conversation's id as their
    ``doc_id`` (the OpenClaw plugin: the session id). ``session``: only
    memories with ``doc_id`` = ``conversation_id``; ``long-term``: all the
    others (facts, documents, other conversations; without a
    ``conversation_id``, everything); ``all`` or None: everything. ``paths``:
    only memories whose path matches one of them (``SearchFilters.paths``).

    Raises:
        InvalidInput: ``session`` without a ``conversation_id``.
    """
    conversation = (conversation_id or "").strip()
    if scope == "session" and not conversation:
        raise InvalidInput("scope session needs the conversation's id (conversationId)")
    return SearchFilters(
        owner=owner,
        doc_ids=(conversation,) if scope == "session" else (),
        exclude_doc_ids=(conversation,) if scope == "long-term" and conversation else (),
        paths=tuple(paths or ()),
    )


ArgsT = TypeVar("ArgsT", bound=ToolArgs)


def parse(kind: type[ArgsT], arguments: Mapping[str, Any] | None) -> ArgsT:
    """A tool call's raw arguments (a JSON object; None: none) as ``kind``.

    Raises:
        InvalidInput: not an object, a missing or ill-typed field, a value out
            of range (msgspec's message, naming the field).
    """
    try:
        return msgspec.convert({} if arguments is None else arguments, kind)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"bad arguments: {exc}") from exc


def input_schema(kind: type[ToolArgs]) -> dict[str, Any]:
    """The JSON Schema of ``kind`` as an MCP tool's flat ``inputSchema``.

    msgspec's schema with the struct inlined (no ``$ref``), no title or
    docstring (the tool has its own description), ``null`` alternatives
    dropped (null means left out, so a client need not know it), and
    ``"type": "string"`` beside string enums, as LLM clients expect.
    """
    name = kind.__name__
    _, components = msgspec.json.schema_components([kind])
    schema = components[name]
    if any("$ref" in str(value) for value in schema.values()):  # a nested Struct: not inlined
        raise TypeError(f"{name} refers to another schema; MCP input schemas must be flat")
    properties = {key: _plain(value) for key, value in schema["properties"].items()}
    flat: dict[str, Any] = {"type": "object", "properties": properties}
    if schema.get("required"):
        flat["required"] = schema["required"]
    return flat


def _plain(schema: dict[str, Any]) -> dict[str, Any]:
    options = schema.get("anyOf")
    if options is not None:
        kept = [option for option in options if option != {"type": "null"}]
        if len(kept) == 1:
            schema = {
                **kept[0],
                **{k: v for k, v in schema.items() if k not in ("anyOf", "default")},
            }
    if (
        "enum" in schema
        and "type" not in schema
        and all(isinstance(v, str) for v in schema["enum"])
    ):
        schema = {"type": "string", **schema}
    return schema


class MemoryListIn(ToolArgs):
    """The arguments of ``memory_list``: a page of the caller's own memories."""

    tag: Annotated[str, _text("Only memories with this tag (e.g. conversation).")] | None = None
    limit: Annotated[Count, _text("Most memories on the page (default 20).")] | None = None
    after: Annotated[str, _text("The nextAfter of the previous page.")] | None = None


class MemoryUpdateIn(ToolArgs):
    """The arguments of ``memory_update``: new text or tags for one of the caller's memories."""

    path: Annotated[str, _text("The memory's path (memory/<id>.md) from memory_search or list.")]
    content: Annotated[str, _text("The corrected text (replaces the old one).")] | None = None
    tags: Annotated[list[str], _text("New tags (replace the old ones).")] | None = None


class MemoryDeleteIn(ToolArgs):
    """The arguments of ``memory_delete``: one of the caller's memories to forget."""

    path: Annotated[str, _text("The memory's path (memory/<id>.md) from memory_search or list.")]
