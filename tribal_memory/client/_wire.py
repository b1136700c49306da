"""The HTTP client's pure part: requests built from arguments, responses decoded, errors mapped.

No I/O here. Each ``*_call`` function turns the arguments of a
:class:`~tribal_memory.base.api.MemoryAPI` method into a :class:`Call` (method,
path, query, body); each ``decode_*`` function turns a response body (parsed
JSON) into the ``base/`` dataclass the library returns. :func:`raise_for_error`
maps the server's error body ``{"error": code, "detail", "status"}`` to the
:class:`~tribal_memory.base.errors.TribalError` subclass with that code.
The two clients (``_async.py``, ``_sync.py``) only send what these build.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

import msgspec

from tribal_memory.base import errors
from tribal_memory.base.graph import CommonNeighbor, Near, Neighbor, Relation, RelationInput
from tribal_memory.base.models import (
    CaptureResult,
    DocumentInfo,
    DocumentResult,
    Memory,
    MemoryInput,
    MemoryPage,
    MemoryPatch,
    OwnerCleared,
    OwnerStats,
    SearchFilters,
    StoreStats,
)
from tribal_memory.base.results import (
    Anchor,
    ChunkContext,
    FeedbackResult,
    Hit,
    LearnedParts,
    SearchMode,
    SearchResult,
    Variant,
)
from tribal_memory.base.stats import CurvePoint, RetrievalStats, UsageCounts
from tribal_memory.base.transfer import ImportResult, OnConflict, TransferCounts
from tribal_memory.base.validation import check_time

JSONL_MEDIA_TYPE = "application/x-ndjson"
"""Media type of an export (``GET /v1/export``) and of an import body."""

Params = list[tuple[str, str]]
T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    """One HTTP request, as the clients send it.

    ``method`` and ``path`` (from the base URL), query ``params``, a ``json``
    body or raw ``content`` with its ``content_type``, extra ``headers``.
    """

    method: str
    path: str
    params: Params = dataclasses.field(default_factory=list)
    json: Any = None
    content: bytes | None = None
    content_type: str | None = None
    headers: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def all_headers(self) -> dict[str, str]:
        """``headers`` plus ``Content-Type`` for a raw body."""
        if self.content_type is None:
            return self.headers
        return {**self.headers, "content-type": self.content_type}


class WireError(errors.TribalError):
    """A response this client cannot read (not the shape this version expects)."""

    status = 502
    code = "bad_response"


# -- errors --------------------------------------------------------------------------------


def _error_classes() -> dict[str, type[errors.TribalError]]:
    """The classes of :mod:`tribal_memory.base.errors` by code (the codes the server sends)."""
    found: dict[str, type[errors.TribalError]] = {}
    pending: list[type[errors.TribalError]] = [errors.TribalError]
    while pending:
        cls = pending.pop()
        if cls.__module__ == errors.__name__:
            found.setdefault(cls.code, cls)
        pending.extend(cls.__subclasses__())
    # Litestar's own checks of a request (a body of the wrong shape) answer this code.
    found["invalid_request"] = errors.InvalidInput
    return found


def error_for(status: int, body: bytes) -> errors.TribalError:
    """The library exception a server's error response stands for.

    Args:
        status: The HTTP status (>= 400).
        body: The response body; normally ``{"error", "detail", "status"}``.

    Returns:
        An instance of the :class:`TribalError` subclass whose ``code`` is the
        body's ``error`` (by code, not status: codes share statuses); an
        unknown code, or a body that is not the error shape, gives a
        :class:`TribalError` carrying the status and code it came with.
    """
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("error"), str):
        text = body.decode("utf-8", "replace").strip()[:200] or "no body"
        error = errors.TribalError(f"HTTP {status} from the server: {text}")
        error.status, error.code = status, "http_error"
        return error
    code, detail = data["error"], str(data.get("detail", ""))
    cls = _error_classes().get(code)
    if cls is None:
        error = errors.TribalError(detail)
        error.status, error.code = status, code
        return error
    return cls(detail)


def raise_for_error(status: int, body: bytes) -> None:
    """Raise :func:`error_for` ``(status, body)`` for a status of 400 or more; else nothing."""
    if status >= 400:
        raise error_for(status, body)


# -- decoding ------------------------------------------------------------------------------


def _convert(data: Any, cls: type[T], *, strict: bool) -> T:
    """``data`` (parsed JSON) as ``cls``; ``strict``: also refuse fields ``cls`` lacks.

    Raises:
        WireError: ``data`` is not what ``cls`` needs.
    """
    if strict and isinstance(data, dict) and dataclasses.is_dataclass(cls):
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise WireError(f"{cls.__name__} in the response has unknown fields {sorted(unknown)}")
    try:
        return msgspec.convert(data, cls, strict=False)
    except msgspec.ValidationError as exc:
        raise WireError(f"{cls.__name__} in the response: {exc}") from exc


def _field(data: Any, name: str) -> Any:
    if not isinstance(data, dict) or name not in data:
        raise WireError(f"the response has no {name!r}")
    return data[name]


_MEMORY_FIELDS = frozenset(f.name for f in dataclasses.fields(Memory))


def decode_memory(data: Any, *, strict: bool = False) -> Memory:
    """A :class:`Memory` from a ``MemoryOut`` body."""
    return _convert(data, Memory, strict=strict)


def decode_capture(data: Any, *, strict: bool = False) -> CaptureResult:
    """A :class:`CaptureResult` from a ``CaptureOut`` body."""
    memory = decode_memory(_field(data, "memory"), strict=strict)
    return _convert({**data, "memory": memory}, CaptureResult, strict=strict)


def decode_captures(data: Any, *, strict: bool = False) -> list[CaptureResult]:
    """The results of a batch capture."""
    return [decode_capture(item, strict=strict) for item in _field(data, "results")]


def decode_page(data: Any, *, strict: bool = False) -> MemoryPage:
    """A :class:`MemoryPage` from a ``MemoryPageOut`` body."""
    memories = tuple(decode_memory(m, strict=strict) for m in _field(data, "memories"))
    return MemoryPage(memories, _field(data, "next_after"))


def _hit(data: Any, *, strict: bool) -> Hit:
    if not isinstance(data, dict):
        raise WireError("a hit in the response is not an object")
    memory = decode_memory({k: v for k, v in data.items() if k in _MEMORY_FIELDS}, strict=False)
    rest = {k: v for k, v in data.items() if k not in _MEMORY_FIELDS}
    return _convert({**rest, "memory": memory}, Hit, strict=strict)


def _optional_memory(data: Any, *, strict: bool) -> Memory | None:
    return None if data is None else decode_memory(data, strict=strict)


def decode_search(data: Any, *, strict: bool = False) -> SearchResult:
    """A :class:`SearchResult` from a ``SearchOut`` body (``filter_key`` is not sent: "")."""
    hits = tuple(_hit(h, strict=strict) for h in _field(data, "hits"))
    context = tuple(
        ChunkContext(
            memory_id=_field(c, "memory_id"),
            parent=_optional_memory(c.get("parent"), strict=strict),
            previous=_optional_memory(c.get("previous"), strict=strict),
            next=_optional_memory(c.get("next"), strict=strict),
        )
        for c in data.get("context", [])
    )
    rest = {k: v for k, v in data.items() if k not in ("hits", "context")}
    return _convert({**rest, "hits": hits, "context": context}, SearchResult, strict=strict)


def decode_feedback(data: Any, *, strict: bool = False) -> FeedbackResult:
    """A :class:`FeedbackResult` from a ``FeedbackOut`` body."""
    return _convert(data, FeedbackResult, strict=strict)


def decode_anchor(data: Any, *, strict: bool = False) -> Anchor:
    """An :class:`Anchor` from an ``AnchorOut`` body."""
    return _convert(data, Anchor, strict=strict)


def decode_anchors(data: Any, *, strict: bool = False) -> list[Anchor]:
    """The anchors of an ``AnchorsOut`` body."""
    return [decode_anchor(a, strict=strict) for a in _field(data, "anchors")]


def decode_variant(data: Any) -> Variant:
    """The ``variant`` of a ``VariantOut`` body."""
    variant = _field(data, "variant")
    if variant not in ("learned", "baseline"):
        raise WireError(f"unknown variant {variant!r} in the response")
    return variant  # type: ignore[no-any-return]


def decode_relation(data: Any, *, strict: bool = False) -> Relation:
    """A :class:`Relation` from a ``RelationOut`` body."""
    return _convert(data, Relation, strict=strict)


def decode_relations(data: Any, *, strict: bool = False) -> list[Relation]:
    """The edges of a ``RelationsOut`` or ``RelateBatchOut`` body."""
    return [decode_relation(r, strict=strict) for r in _field(data, "relations")]


def decode_neighbors(data: Any, *, strict: bool = False) -> list[Neighbor]:
    """The neighbours of a ``NeighborsOut`` body."""
    return [
        Neighbor(
            memory=decode_memory(_field(n, "memory"), strict=strict),
            steps=_field(n, "steps"),
            via=decode_relation(_field(n, "via"), strict=strict),
        )
        for n in _field(data, "neighbors")
    ]


def decode_common(data: Any, *, strict: bool = False) -> list[CommonNeighbor]:
    """The memories of an ``IntersectionOut`` body."""
    return [
        CommonNeighbor(
            memory=decode_memory(_field(c, "memory"), strict=strict),
            steps=tuple(_field(c, "steps")),
        )
        for c in _field(data, "memories")
    ]


def decode_document(data: Any, *, strict: bool = False) -> DocumentResult:
    """A :class:`DocumentResult` from a ``DocumentOut`` body."""
    return _convert(data, DocumentResult, strict=strict)


def decode_documents(data: Any, *, strict: bool = False) -> list[DocumentInfo]:
    """The documents of a ``DocumentsOut`` body."""
    return [_convert(d, DocumentInfo, strict=strict) for d in _field(data, "documents")]


def decode_cleared(data: Any, *, strict: bool = False) -> OwnerCleared:
    """An :class:`OwnerCleared` from an ``OwnerClearedOut`` body."""
    return _convert(data, OwnerCleared, strict=strict)


def decode_stats(data: Any, *, strict: bool = False) -> StoreStats:
    """A :class:`StoreStats` from a ``StatsOut`` body."""
    return _convert(data, StoreStats, strict=strict)


def decode_owner_stats(data: Any, *, strict: bool = False) -> OwnerStats:
    """An :class:`OwnerStats` from an ``OwnerStatsOut`` body."""
    return _convert(data, OwnerStats, strict=strict)


def decode_retrieval_stats(data: Any, *, strict: bool = False) -> RetrievalStats:
    """A :class:`RetrievalStats` from a ``RetrievalStatsOut`` body (curve points regrouped)."""
    usage = {f.name for f in dataclasses.fields(UsageCounts)}
    curve = tuple(
        CurvePoint(
            period=_field(point, "period"),
            counts=_convert(
                {k: v for k, v in point.items() if k in usage}, UsageCounts, strict=strict
            ),
        )
        for point in _field(data, "learning_curve")
    )
    variants = {
        name: _convert(counts, UsageCounts, strict=strict)
        for name, counts in _field(data, "variants").items()
    }
    rest = {k: v for k, v in data.items() if k not in ("learning_curve", "variants", "overall")}
    overall = _convert(_field(data, "overall"), UsageCounts, strict=strict)
    return _convert(
        {**rest, "overall": overall, "variants": variants, "learning_curve": curve},
        RetrievalStats,
        strict=strict,
    )


def decode_import(data: Any, *, strict: bool = False) -> ImportResult:
    """An :class:`ImportResult` from an ``ImportOut`` body."""
    counts = {
        "memories": _convert(_field(data, "memories"), TransferCounts, strict=strict),
        "relations": _convert(_field(data, "relations"), TransferCounts, strict=strict),
        "rows": {
            table: _convert(c, TransferCounts, strict=strict)
            for table, c in _field(data, "rows").items()
        },
    }
    return _convert({**data, **counts}, ImportResult, strict=strict)


# -- requests ------------------------------------------------------------------------------


def _time(value: datetime, name: str = "time") -> str:
    """RFC 3339 with an offset; a naive time is taken as UTC, as the library takes it.

    Raises:
        InvalidInput: out of range once in UTC.
    """
    checked = check_time(value, name)
    assert checked is not None
    return checked.isoformat()


def _filter_time(value: datetime) -> str:
    """A time filter as RFC 3339; as in the store, a filter time must carry a zone.

    Raises:
        InvalidInput: a naive time.
    """
    if value.tzinfo is None:
        raise errors.InvalidInput("time filters need a timezone (e.g. 2024-01-01T00:00:00Z)")
    return value.isoformat()


def _owner(owner: str | None) -> Params:
    return [] if owner is None else [("owner", owner)]


def _quoted(segment: str) -> str:
    """A path segment with ``/``, ``?``, ``#`` and ``%`` escaped."""
    from urllib.parse import quote

    return quote(segment, safe="")


def _if_match(version: str | None) -> dict[str, str]:
    return {} if version is None else {"if-match": f'"{version}"'}


def memory_body(item: MemoryInput) -> dict[str, Any]:
    """The ``CaptureRequest`` body of ``item``."""
    body: dict[str, Any] = msgspec.to_builtins(item, builtin_types=(datetime,))
    if item.event_time is not None:
        body["event_time"] = _time(item.event_time, "event_time")
    return body


def capture_call(item: MemoryInput) -> Call:
    """``POST /v1/memories``."""
    return Call("POST", "/v1/memories", json=memory_body(item))


def capture_batch_call(items: Sequence[MemoryInput], *, near_duplicates: bool) -> Call:
    """``POST /v1/memories/batch``."""
    body = {"memories": [memory_body(i) for i in items], "near_duplicates": near_duplicates}
    return Call("POST", "/v1/memories/batch", json=body)


def get_call(memory_id: str, *, owner: str | None) -> Call:
    """``GET /v1/memories/{id}``."""
    return Call("GET", f"/v1/memories/{_quoted(memory_id)}", _owner(owner))


def update_call(
    memory_id: str, patch: MemoryPatch, *, owner: str | None, if_version: str | None
) -> Call:
    """``PATCH /v1/memories/{id}`` (fields left None are not sent)."""
    body = {
        name: _time(value) if isinstance(value, datetime) else value
        for name, value in msgspec.to_builtins(patch, builtin_types=(datetime,)).items()
        if value is not None
    }
    if patch.event_time is not None:
        body["event_time"] = _time(patch.event_time, "event_time")
    return Call(
        "PATCH",
        f"/v1/memories/{_quoted(memory_id)}",
        _owner(owner),
        json=body,
        headers=_if_match(if_version),
    )


def delete_call(memory_id: str, *, owner: str | None, if_version: str | None) -> Call:
    """``DELETE /v1/memories/{id}``."""
    path = f"/v1/memories/{_quoted(memory_id)}"
    return Call("DELETE", path, _owner(owner), headers=_if_match(if_version))


def _local_filters(filters: SearchFilters) -> None:
    """Refuse the filters only an in-process caller sets.

    Raises:
        InvalidInput: ``memory_ids`` or ``exclude_kinds`` set.
    """
    if filters.memory_ids is not None or filters.exclude_kinds:
        raise errors.InvalidInput(
            "memory_ids and exclude_kinds filters are not sent over HTTP (use near=...)"
        )


def list_call(filters: SearchFilters, *, limit: int | None, after: str | None) -> Call:
    """``GET /v1/memories`` (one page)."""
    _local_filters(filters)
    params = _owner(filters.owner)
    params.append(("include_shared", "true" if filters.include_shared else "false"))
    params += [("tag", t) for t in filters.tags]
    params += [("kind", k) for k in filters.kinds]
    params += [("source", s) for s in filters.sources]
    for name, value in (("since", filters.since), ("until", filters.until)):
        if value is not None:
            params.append((name, _filter_time(value)))
    if limit is not None:
        params.append(("limit", str(limit)))
    if after is not None:
        params.append(("after", after))
    return Call("GET", "/v1/memories", params)


def clear_owner_call(owner: str, *, confirm: str | None) -> Call:
    """``DELETE /v1/owners/{owner}``."""
    params = [] if confirm is None else [("confirm", confirm)]
    return Call("DELETE", f"/v1/owners/{_quoted(owner)}", params)


def _scope(
    k: int, filters: SearchFilters | None, min_score: float, near: Near | None
) -> dict[str, Any]:
    """The ``SearchScope`` fields of a search body."""
    filters = filters or SearchFilters()
    _local_filters(filters)
    body: dict[str, Any] = {
        "k": k,
        "owner": filters.owner,
        "include_shared": filters.include_shared,
        "tags": list(filters.tags),
        "kinds": list(filters.kinds),
        "sources": list(filters.sources),
        "since": None if filters.since is None else _filter_time(filters.since),
        "until": None if filters.until is None else _filter_time(filters.until),
        "min_score": min_score,
    }
    if near is not None:
        body |= {
            "near": near.memory_id,
            "steps": near.traversal.steps,
            "types": list(near.traversal.types),
            "block": list(near.traversal.block),
        }
    return body


def search_call(
    query: str,
    *,
    k: int,
    filters: SearchFilters | None,
    mode: SearchMode | None,
    min_score: float,
    learned: LearnedParts | None,
    context: bool,
    near: Near | None,
    feedback: bool = False,
    session_id: str | None = None,
) -> Call:
    """``POST /v1/search`` (or ``/v1/recall`` with ``mode`` None)."""
    body = _scope(k, filters, min_score, near) | {
        "query": query,
        "learned": None if learned is None else list(learned.names),
        "context": context,
        "feedback": feedback,
        "session_id": session_id,
    }
    if mode is None:
        return Call("POST", "/v1/recall", json=body)
    return Call("POST", "/v1/search", json=body | {"mode": mode})


def search_vector_call(
    vector: Sequence[float],
    *,
    k: int,
    filters: SearchFilters | None,
    min_score: float,
    near: Near | None,
) -> Call:
    """``POST /v1/search/vector``."""
    body = _scope(k, filters, min_score, near) | {"vector": [float(v) for v in vector]}
    return Call("POST", "/v1/search/vector", json=body)


def feedback_call(retrieval_id: str, used_ids: Sequence[str], *, owner: str | None) -> Call:
    """``POST /v1/feedback``."""
    body = {"retrieval_id": retrieval_id, "used_ids": list(used_ids), "owner": owner}
    return Call("POST", "/v1/feedback", json=body)


def anchors_call(memory_id: str, *, owner: str | None) -> Call:
    """``GET /v1/memories/{id}/anchors``."""
    return Call("GET", f"/v1/memories/{_quoted(memory_id)}/anchors", _owner(owner))


def add_anchor_call(memory_id: str, text: str, *, owner: str | None) -> Call:
    """``POST /v1/memories/{id}/anchors``."""
    path = f"/v1/memories/{_quoted(memory_id)}/anchors"
    return Call("POST", path, _owner(owner), json={"text": text})


def remove_anchor_call(memory_id: str, text: str, *, owner: str | None) -> Call:
    """``DELETE /v1/memories/{id}/anchors?text=``."""
    path = f"/v1/memories/{_quoted(memory_id)}/anchors"
    return Call("DELETE", path, [("text", text), *_owner(owner)])


def pin_variant_call(owner: str, variant: Variant | None) -> Call:
    """``PUT /v1/variants/{owner}`` (``DELETE`` to unpin)."""
    path = f"/v1/variants/{_quoted(owner)}"
    if variant is None:
        return Call("DELETE", path)
    return Call("PUT", path, json={"variant": variant})


def variant_call(owner: str) -> Call:
    """``GET /v1/variants/{owner}``."""
    return Call("GET", f"/v1/variants/{_quoted(owner)}")


def relate_call(
    source_id: str, target_id: str, type: str, *, weight: float, owner: str | None
) -> Call:
    """``POST /v1/relations``."""
    body = {"source_id": source_id, "target_id": target_id, "type": type, "weight": weight}
    return Call("POST", "/v1/relations", _owner(owner), json=body)


def relate_batch_call(edges: Sequence[RelationInput], *, owner: str | None) -> Call:
    """``POST /v1/relations/batch``."""
    body = {"relations": [msgspec.to_builtins(e) for e in edges]}
    return Call("POST", "/v1/relations/batch", _owner(owner), json=body)


def unrelate_call(source_id: str, target_id: str, type: str, *, owner: str | None) -> Call:
    """``DELETE /v1/relations`` (the edge named in the query)."""
    params = [("source_id", source_id), ("target_id", target_id), ("type", type)]
    return Call("DELETE", "/v1/relations", params + _owner(owner))


def relations_call(memory_id: str, *, owner: str | None) -> Call:
    """``GET /v1/memories/{id}/relations``."""
    return Call("GET", f"/v1/memories/{_quoted(memory_id)}/relations", _owner(owner))


def _walk(steps: int, types: Sequence[str], block: Sequence[str]) -> Params:
    params = [("steps", str(steps))]
    if types:
        params.append(("types", ",".join(types)))
    if block:
        params.append(("block", ",".join(block)))
    return params


def neighbors_call(
    memory_id: str, *, steps: int, owner: str | None, types: Sequence[str], block: Sequence[str]
) -> Call:
    """``GET /v1/memories/{id}/neighbors``."""
    path = f"/v1/memories/{_quoted(memory_id)}/neighbors"
    return Call("GET", path, _walk(steps, types, block) + _owner(owner))


def intersection_call(
    memory_ids: Sequence[str],
    *,
    steps: int,
    owner: str | None,
    types: Sequence[str],
    block: Sequence[str],
    limit: int | None,
) -> Call:
    """``GET /v1/graph/intersection``."""
    params = [("ids", ",".join(memory_ids)), *_walk(steps, types, block), *_owner(owner)]
    if limit is not None:
        params.append(("limit", str(limit)))
    return Call("GET", "/v1/graph/intersection", params)


def ingest_call(path: str, data: bytes | str, *, owner: str) -> Call:
    """``POST /v1/documents``: text as ``text``, bytes (and PDFs) as ``content_base64``."""
    body: dict[str, Any] = {"path": path, "owner": owner}
    if isinstance(data, str) and not path.lower().endswith(".pdf"):
        body["text"] = data
    else:
        raw = data.encode("utf-8") if isinstance(data, str) else data
        body["content_base64"] = base64.b64encode(raw).decode("ascii")
    return Call("POST", "/v1/documents", json=body)


def documents_call(*, owner: str | None) -> Call:
    """``GET /v1/documents``."""
    return Call("GET", "/v1/documents", _owner(owner))


def delete_document_call(path: str, *, owner: str | None) -> Call:
    """``DELETE /v1/documents?path=``."""
    return Call("DELETE", "/v1/documents", [("path", path), *_owner(owner)])


def export_call(*, owner: str | None) -> Call:
    """``GET /v1/export`` (read as a stream of lines)."""
    return Call("GET", "/v1/export", _owner(owner))


def import_call(data: bytes, *, on_conflict: OnConflict) -> Call:
    """``POST /v1/import`` with the export as the body."""
    return Call(
        "POST",
        "/v1/import",
        [("on_conflict", on_conflict)],
        content=data,
        content_type=JSONL_MEDIA_TYPE,
    )


_FRAME_PREFIXES = ('{"type":"header"', '{"type":"end"')


def is_record(line: str) -> bool:
    """Whether an export line is a record: a memory, relation or row (what export progress counts).

    Blank lines, the header and the end line are not.
    """
    return bool(line.strip()) and not line.startswith(_FRAME_PREFIXES)


def record_count(data: bytes) -> int:
    """Records in an export's bytes (see :func:`is_record`)."""
    return sum(1 for line in data.decode("utf-8", "replace").splitlines() if is_record(line))


def stats_call() -> Call:
    """``GET /v1/stats``."""
    return Call("GET", "/v1/stats")


def owner_stats_call(owner: str | None) -> Call:
    """``GET /v1/stats/owner``."""
    return Call("GET", "/v1/stats/owner", _owner(owner))


def retrieval_stats_call(*, owner: str | None, bucket: str, since: datetime | None) -> Call:
    """``GET /v1/stats/retrieval``."""
    params = _owner(owner) + [("bucket", bucket)]
    if since is not None:
        params.append(("since", _time(since, "since")))
    return Call("GET", "/v1/stats/retrieval", params)
