"""The yardsticks of ``bench locomo``: what a user could build without this server.

``bm25``: Okapi BM25 (rank-bm25's ``BM25Okapi``, Robertson & Zaragoza 2009)
over each memory's words with the project's stop words removed and Snowball
stems (:mod:`tribal_memory.learned.text`). ``lin``: the linear fusion
``0.6 * cosine + 0.4 * BM25``, each min-max normalised over the whole
conversation (every memory scored: no candidate pool), with the same
all-MiniLM-L6-v2 vectors the server stored. Both rank every memory of one
conversation in process; rank-bm25 is meant for such small corpora.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tribal_memory.base.errors import TribalError
from tribal_memory.embeddings.base import Vector
from tribal_memory.learned.text import content_terms, stem

LIN_VECTOR_WEIGHT = 0.6


def bm25_terms(text: str) -> list[str]:
    """Stems of the content words of ``text`` (stop and question words removed)."""
    return [stem(word) for word in content_terms(text)]


def _min_max(scores: Any) -> Any:
    """``scores`` (a 1-d array) scaled to [0, 1]; all zeros when they are all equal."""
    low, high = float(scores.min()), float(scores.max())
    if high <= low:
        return np.zeros(len(scores))
    return (np.asarray(scores, dtype=np.float64) - low) / (high - low)


class ConversationBaselines:
    """``bm25`` and ``lin`` rankings over one conversation's memories.

    Args:
        ids: An id per memory (returned in rankings).
        texts: Each memory's text.
        vectors: Their embeddings, shape ``(len(texts), dim)``, rows L2-normalised.

    Raises:
        TribalError: ``rank-bm25`` is not installed (``pip install 'tribal-memory[bench]'``).
    """

    def __init__(self, ids: Sequence[str], texts: Sequence[str], vectors: Vector) -> None:
        try:
            from rank_bm25 import BM25Okapi
        except ImportError as exc:  # an optional dependency of the benchmark
            raise TribalError(
                "the bm25 and lin baselines need rank-bm25: pip install 'tribal-memory[bench]'"
            ) from exc
        self.ids = list(ids)
        self.vectors = vectors
        self._bm25: Any = BM25Okapi([bm25_terms(t) or ["_"] for t in texts])

    def rank(self, question: str, query_vector: Vector, k: int) -> dict[str, list[str]]:
        """The top ``k`` ids of each baseline, best first: ``{"bm25": [...], "lin": [...]}``."""
        text = np.asarray(self._bm25.get_scores(bm25_terms(question)), dtype=np.float64)
        cosine = self.vectors @ np.asarray(query_vector, dtype=np.float32)
        fused = LIN_VECTOR_WEIGHT * _min_max(cosine) + (1 - LIN_VECTOR_WEIGHT) * _min_max(text)
        return {
            "bm25": [self.ids[i] for i in np.argsort(-text, kind="stable")[:k]],
            "lin": [self.ids[i] for i in np.argsort(-fused, kind="stable")[:k]],
        }
