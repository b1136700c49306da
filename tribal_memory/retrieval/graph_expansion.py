"""Graph-expanded scores: a candidate is lifted by its best-scoring related candidate (DESIGN §7).

``score = (own + weight x best related score) / (1 + weight)``, the related
memories being those of the candidate pool that are

- joined to it by a relation (either direction, any type);
- its heading parent, or its children (a document chunk's ``parent_id``);
- in the same section: the same owner, ``doc_id`` and ``section`` (metadata)
  for document chunks, the same owner and ``doc_id`` for memories with no
  section (e.g. the turns of one conversation session).

Only candidates count, so nothing is fetched and no memory the search could
not see (another owner's) takes part. Dividing by ``1 + weight`` keeps scores
in [0, 1] and ranks exactly as ``own + weight x best`` does. The score of
DESIGN §7 ("primary + 0.3 x best related"), a one-step form of relevance
propagation over links (e.g. Shakery & Zhai, "A probabilistic relevance
propagation model for hypertext retrieval", CIKM 2006).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from tribal_memory.base.models import Memory
from tribal_memory.retrieval.fusion import Candidate, load_candidates

Edge = tuple[str, str]
"""A relation between two memory ids (its direction does not matter here)."""


def _section(memory: Memory) -> tuple[str, str, object] | None:
    if memory.doc_id is None:
        return None
    return (memory.owner, memory.doc_id, memory.metadata.get("section"))


def related_in_pool(candidates: Sequence[Candidate], edges: Iterable[Edge]) -> dict[str, set[str]]:
    """For each candidate id, the other candidates related to it (see the module docstring).

    Returns:
        ``{memory id: {related memory ids}}``; candidates with none are absent.
    """
    ids = {c.memory_id for c in candidates}
    load_candidates(candidates)  # parents and sections are in the whole memories
    related: dict[str, set[str]] = defaultdict(set)

    def join(a: str, b: str) -> None:
        if a != b and a in ids and b in ids:
            related[a].add(b)
            related[b].add(a)

    for source, target in edges:
        join(source, target)
    sections: dict[tuple[str, str, object], list[str]] = defaultdict(list)
    for entry in candidates:
        if not entry.loaded:  # deleted since the search
            continue
        memory = entry.memory
        if memory.parent_id is not None:
            join(memory.memory_id, memory.parent_id)
        section = _section(memory)
        if section is not None:
            sections[section].append(memory.memory_id)
    for members in sections.values():
        for member in members:
            related[member].update(m for m in members if m != member)
    return {i: r for i, r in related.items() if r}


def graph_expanded(
    candidates: list[Candidate], edges: Iterable[Edge], weight: float
) -> list[Candidate]:
    """Each candidate's score lifted by its best related candidate's, re-ranked.

    Args:
        candidates: Fused candidates, scores in [0, 1].
        edges: Relations among (at least) the candidates' ids.
        weight: Share of the best related score added, >= 0; 0 returns the list unchanged.

    Returns:
        The candidates with ``(own + weight x best related) / (1 + weight)``
        scores, best first (ties: memory id); scores stay in [0, 1].
    """
    if weight <= 0 or not candidates:
        return candidates
    related = related_in_pool(candidates, edges)
    before = {c.memory_id: c.score for c in candidates}
    for entry in candidates:
        best = max((before[r] for r in related.get(entry.memory_id, ())), default=0.0)
        entry.score = (entry.score + weight * best) / (1.0 + weight)
    return sorted(candidates, key=lambda e: (-e.score, e.memory_id))
