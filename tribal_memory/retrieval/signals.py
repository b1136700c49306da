"""Per-memory learned signals of one search, gathered from the learned parts.

The learner's parts (:mod:`tribal_memory.learned`) answer for a query; the
functions here collect those answers per memory id into :class:`Signals`,
which :mod:`tribal_memory.retrieval.ranking` turns into score gains:

- ``anchor``: the query's match with a memory's anchors (past queries that
  led to it), in [0, 1];
- ``boost``: the feedback boost of similar past queries, in
  [-max_penalty, max_boost];
- ``expansion``: ``expansion_weight`` x the best keyword variant's normalised
  BM25 match, in [0, expansion_weight], for memories in the candidate pool;
- ``prior``: the memory's usage prior (used / skipped on any question).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from tribal_memory.learned.anchors import AnchorMatch
from tribal_memory.learned.feedback import UsagePrior
from tribal_memory.retrieval.fusion import Normalisation, text_scale
from tribal_memory.store.base import RowRef

VariantSearch = tuple[str, Future[list[tuple[RowRef, float]]]]
"""A keyword variant and its started BM25 search: ``[(row reference, raw BM25)]``."""

Expansion = dict[RowRef, tuple[float, str]]
"""Row reference -> (its best variant's evidence, that variant): see :func:`expansion_of`."""


@dataclass(slots=True)
class Signals:
    """What the learned parts say of one memory for one query (see the module docstring).

    ``expanded_from`` is the variant behind ``expansion`` (None: none).
    Ranking folds the prior into ``boost``; after it, ``boost`` is the net
    learned boost reported on the hit.
    """

    expansion: float = 0.0
    expanded_from: str | None = None
    anchor: float | None = None
    boost: float = 0.0
    prior: UsagePrior | None = None


SignalMap = dict[str, Signals]
"""Memory id -> its signals; memories with no signal are absent."""


def add_anchors(signals: SignalMap, anchored: Sequence[AnchorMatch]) -> None:
    """Set each anchored memory's ``anchor`` match."""
    for match in anchored:
        signals.setdefault(match.memory_id, Signals()).anchor = match.score


def add_boosts(signals: SignalMap, boosts: Mapping[str, float], *, merge: bool = False) -> None:
    """Set feedback boosts, ``{memory id: boost}``.

    ``merge``: where a memory already has a boost, keep the larger of the two
    (for the team's boosts, which hold the owner's own feedback on shared
    memories too and must not count twice); else the new one replaces it.
    """
    for memory_id, boost in boosts.items():
        entry = signals.setdefault(memory_id, Signals())
        entry.boost = boost if not merge or entry.boost == 0.0 else max(entry.boost, boost)


def expansion_of(
    expanding: Sequence[VariantSearch], *, weight: float, normalisation: Normalisation
) -> Expansion:
    """Each row's best keyword-variant evidence, from the started BM25 searches.

    A variant's BM25 goes on the scale the query's own went on in fusion
    (``normalisation``), so that "beats the query's own match" compares like
    with like; a variant with no positive score adds nothing. The rows are
    named by the store's references (:attr:`ScoredMemory.ref
    <tribal_memory.store.base.ScoredMemory.ref>`): :func:`add_expansion`
    keeps those of the candidate pool.
    """
    best: Expansion = {}
    for variant, search in expanding:
        found = search.result()
        if max((score for _, score in found), default=0.0) <= 0:
            continue
        to_text = text_scale([score for _, score in found], normalisation)
        for ref, score in found:
            value = weight * to_text(score)
            if value > best.get(ref, (0.0, ""))[0]:
                best[ref] = (value, variant)
    return best


def add_expansion(
    signals: SignalMap, expansion: Expansion, memory_ids: Mapping[RowRef, str]
) -> None:
    """Set the variants' evidence of the pool's memories (``memory_ids``: ref -> memory id).

    Evidence for rows outside the pool is dropped: scoring them would cost a
    read of their rows, and on the learning benchmark (top-10 feedback)
    recall@10 was the same without them (MRR 0.001 higher on new questions).
    """
    for ref, (value, variant) in expansion.items():
        memory_id = memory_ids.get(ref)
        if memory_id is None:
            continue
        entry = signals.setdefault(memory_id, Signals())
        if value > entry.expansion:
            entry.expansion, entry.expanded_from = value, variant


def add_priors(
    signals: SignalMap, ids: Sequence[str], found: Sequence[Mapping[str, UsagePrior]]
) -> None:
    """Set the usage prior of each of ``ids``: the larger parts of the owners' priors.

    ``found``: one ``{memory id: prior}`` per owner whose priors count (the
    searcher's and, on shared memories, the team's).
    """
    for memory_id in ids:
        prior: UsagePrior | None = None
        for priors in found:
            own = priors.get(memory_id)
            if own is not None:
                prior = own if prior is None else _larger(prior, own)
        if prior is not None:
            signals.setdefault(memory_id, Signals()).prior = prior


def _larger(a: UsagePrior, b: UsagePrior) -> UsagePrior:
    """The larger ``used`` and the larger ``skipped`` of two priors."""
    return UsagePrior(max(a.used, b.used), max(a.skipped, b.skipped))
