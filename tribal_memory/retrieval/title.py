"""Mode ``title``: find the sections whose titles match the query, then their best chunks.

The corpus is the heading path (``"Logging HOWTO > Advanced Logging Tutorial"``)
of every section summary the caller may see, plus the document's path words;
for a document summary, the document's title and path. It is ranked with BM25
(Robertson & Zaragoza 2009; ``rank_bm25``'s Okapi variant) over Snowball stems
of the content words, the query's words that only say "a section" (section,
chapter, say, describe...) dropped. One corpus is kept per filter scope and
rebuilt when the store's version changes.

The sections scoring at least :data:`MIN_SHARE` of the best title score (at most
:data:`SECTIONS` of them) are chosen, with every section under them; a hybrid
search over their chunks (the ``summarizes`` relations of their summaries,
as a prefilter on memory ids) ranks the chunks. The hits are the chosen
sections' summaries, scored by their title score divided by the best, and
the chunks, scored ``0.5 x`` their section's title share ``+ 0.5 x`` their
hybrid score; all in [0, 1], best first. No title matching: a plain hybrid
search, which ``mode_reason`` says.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rank_bm25 import BM25Okapi

from tribal_memory.base.models import SUMMARY_KIND, Memory, SearchFilters
from tribal_memory.base.results import Hit, SearchResult
from tribal_memory.graph.relations import RelationGraph
from tribal_memory.learned.text import content_terms, stem
from tribal_memory.store.base import MemoryStore

SECTIONS = 3
"""Most sections a title search chooses."""
MIN_SHARE = 0.5
"""Least title score of a chosen section, as a share of the best one's."""
TITLE_WEIGHT = 0.5
"""Share of a chunk's score that is its section's title score (the rest: its hybrid score)."""
_CACHED_SCOPES = 16
_META_WORDS = frozenset(
    """section sections chapter chapters part parts say says said describe describes
    explain explains mention mentions cover covers covered documentation docs doc page
    heading headings titled called""".split()  # noqa: SIM905  # a word list reads better as text
)
_PATH_SPLIT = re.compile(r"[/_.\-]+")

Search = Callable[[SearchFilters, int], SearchResult]
"""A hybrid search of the query under some filters for some number of hits."""


def _terms(text: str) -> list[str]:
    return [stem(word) for word in content_terms(text)]


def query_terms(query: str) -> list[str]:
    """The stems a title search matches: content words, "section"-like words dropped."""
    return [stem(w) for w in content_terms(query) if w not in _META_WORDS]


def title_text(memory: Memory) -> str:
    """What a summary's title entry holds: heading path (or title) and the path's words."""
    meta = memory.metadata
    heading = str(meta.get("heading") or meta.get("title") or "")
    path = memory.source or ""
    stem_path = path.rsplit(".", 1)[0] if "." in path.rsplit("/", 1)[-1] else path
    return f"{heading} {' '.join(_PATH_SPLIT.split(stem_path))}"


@dataclass(frozen=True, slots=True)
class _Corpus:
    version: int
    summaries: list[Memory]
    bm25: BM25Okapi | None


class TitleIndex:
    """Section titles of the summaries visible under a filter, BM25-ranked.

    Args:
        store: Where the summary memories are.
        graph: Their ``summarizes`` relations (None: titles match, no chunk is found).
    """

    def __init__(self, store: MemoryStore, graph: RelationGraph | None) -> None:
        self._store = store
        self._graph = graph
        self._corpora: OrderedDict[SearchFilters, _Corpus] = OrderedDict()
        self._lock = threading.Lock()

    def ranked(self, query: str, filters: SearchFilters) -> list[tuple[Memory, float]]:
        """Summaries whose title entry matches ``query``, best first, with BM25 scores > 0.

        Raises:
            StoreUnavailable: the store could not be read.
        """
        terms = query_terms(query)
        corpus = self._corpus(filters)
        if not terms or corpus.bm25 is None:
            return []
        scores = corpus.bm25.get_scores(terms)
        found = [(m, float(s)) for m, s in zip(corpus.summaries, scores, strict=True) if s > 0]
        found.sort(key=lambda pair: (-pair[1], pair[0].memory_id))
        return found

    def _corpus(self, filters: SearchFilters) -> _Corpus:
        scope = dataclasses.replace(filters, kinds=(SUMMARY_KIND,), exclude_kinds=())
        version = self._store.version
        with self._lock:
            cached = self._corpora.get(scope)
            if cached is not None and cached.version == version:
                self._corpora.move_to_end(scope)
                return cached
        summaries = [m for batch, _ in self._store.scan(scope) for m in batch]
        summaries.sort(key=lambda m: m.memory_id)
        documents = [_terms(title_text(m)) for m in summaries]
        bm25 = BM25Okapi(documents) if any(documents) else None
        corpus = _Corpus(version, summaries, bm25)
        with self._lock:
            self._corpora[scope] = corpus
            while len(self._corpora) > _CACHED_SCOPES:
                self._corpora.popitem(last=False)
        return corpus

    def sections_under(self, chosen: Memory, filters: SearchFilters) -> list[Memory]:
        """``chosen`` and the section summaries under it in its document."""
        corpus = self._corpus(filters)
        heading = str(chosen.metadata.get("heading") or "")
        whole = chosen.metadata.get("summary_of") == "document"
        return [chosen] + [
            m
            for m in corpus.summaries
            if m.doc_id == chosen.doc_id
            and m.memory_id != chosen.memory_id
            and m.metadata.get("summary_of") == "section"
            and (whole or str(m.metadata.get("heading", "")).startswith(heading + " > "))
        ]

    def chunks_of(self, summary_ids: Sequence[str]) -> dict[str, str]:
        """``{chunk id: summary id}`` of what ``summary_ids`` summarise (``summarizes``)."""
        if self._graph is None or not summary_ids:
            return {}
        wanted = set(summary_ids)
        return {
            r.target_id: r.source_id
            for r in self._graph.edges_of(list(wanted))
            if r.type == "summarizes" and r.source_id in wanted
        }


def title_search(
    query: str,
    *,
    k: int,
    filters: SearchFilters,
    titles: TitleIndex,
    search: Search,
    min_score: float = 0.0,
) -> SearchResult:
    """A ``title`` search (see the module docstring).

    Args:
        query: The question.
        k: Most hits.
        filters: The caller's prefilter (its ``kinds`` do not apply to summaries).
        titles: The title index.
        search: Runs the hybrid search of the query.
        min_score: Hits scoring below it are dropped, in [0, 1].

    Returns:
        Mode ``title`` (``hybrid`` with a ``mode_reason`` when no title matched).
    """
    ranked = titles.ranked(query, filters)
    if not ranked:
        plain = search(filters, k)
        return dataclasses.replace(
            plain, mode_reason="title: no section title matches the query, ran hybrid"
        )
    best = ranked[0][1]
    chosen = [(m, s / best) for m, s in ranked if s >= MIN_SHARE * best][:SECTIONS]
    share_of: dict[str, float] = {}
    for summary, share in chosen:
        for section in titles.sections_under(summary, filters):
            share_of[section.memory_id] = max(share_of.get(section.memory_id, 0.0), share)
    chunk_section = titles.chunks_of(list(share_of))
    ids = [i for i in chunk_section if filters.memory_ids is None or i in filters.memory_ids]
    inner = search(dataclasses.replace(filters, memory_ids=tuple(ids)), k) if ids else None
    scored: list[tuple[float, Hit]] = [(share, Hit(summary, share, 0)) for summary, share in chosen]
    for hit in inner.hits if inner is not None else ():
        share = share_of.get(chunk_section.get(hit.memory.memory_id, ""), 0.0)
        score = TITLE_WEIGHT * share + (1 - TITLE_WEIGHT) * hit.score
        scored.append((score, dataclasses.replace(hit, score=score)))
    scored = [pair for pair in scored if pair[0] >= min_score]
    scored.sort(key=lambda pair: -pair[0])
    hits = tuple(
        dataclasses.replace(hit, rank=rank) for rank, (_, hit) in enumerate(scored[:k], start=1)
    )
    return SearchResult(
        hits,
        "title",
        inner.fallback if inner is not None else None,
        variant=inner.variant if inner is not None else "baseline",
    )
