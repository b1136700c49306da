"""The plain baseline of ``bench perf``: what a user might build instead of this server.

Brute-force numpy cosine over the same vectors plus ``rank-bm25`` (Okapi BM25,
Robertson & Zaragoza 2009) over the same texts, each giving its top 50, fused
like the server does by default (min-max normalised, 0.6 vector / 0.4 BM25).
It runs in-process: no HTTP, no filters, no learned layer, no persistence.
rank-bm25 is meant for small in-memory corpora; here it is only the yardstick.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from tribal_memory.base.errors import TribalError
from tribal_memory.embeddings.base import Embedder, Vector

_TOKEN = re.compile(r"\w+")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _normalised(scores: Vector) -> Vector:
    low, high = float(scores.min()), float(scores.max())
    if high <= low:
        return np.ones_like(scores)
    out: Vector = (scores - low) / (high - low)
    return out


class PlainBaseline:
    """Hybrid search the plain way over ``texts`` and their ``vectors``.

    Args:
        texts: The corpus.
        vectors: Their embeddings, float32 of shape ``(len(texts), dim)``, rows
            L2-normalised (so a dot product is the cosine similarity).
        embedder: The model embedding the queries (the corpus's model).
        vector_weight: Weight of the vector part of the fused score, in [0, 1].
        pool: Candidates taken from each side before fusing.

    Raises:
        TribalError: ``rank-bm25`` is not installed (``pip install
            'tribal-memory[bench]'``).
    """

    def __init__(
        self,
        texts: Sequence[str],
        vectors: Vector,
        embedder: Embedder,
        *,
        vector_weight: float = 0.6,
        pool: int = 50,
    ) -> None:
        try:
            from rank_bm25 import BM25Okapi
        except ImportError as exc:
            raise TribalError(
                "the baseline needs rank-bm25: pip install 'tribal-memory[bench]'"
            ) from exc
        self._bm25 = BM25Okapi([_tokens(text) for text in texts])
        self._vectors = vectors
        self._embedder = embedder
        self._vector_weight = vector_weight
        self._pool = min(pool, len(texts))

    def search(self, query: str, k: int = 10) -> list[int]:
        """Positions in ``texts`` of the ``k`` best matches of ``query``, best first.

        The query embedding is included (as in a server round trip).
        """
        query_vector = self._embedder.embed(query, query=True)
        cosine = self._vectors @ query_vector
        bm25 = np.asarray(self._bm25.get_scores(_tokens(query)), dtype=np.float32)
        pool = self._pool
        vector_top = np.argpartition(-cosine, pool - 1)[:pool]
        text_top = np.argpartition(-bm25, pool - 1)[:pool]
        candidates = np.union1d(vector_top, text_top)
        fused = self._vector_weight * _normalised(cosine[candidates]) + (
            1 - self._vector_weight
        ) * _normalised(bm25[candidates])
        order = np.argsort(-fused, kind="stable")[:k]
        return [int(i) for i in candidates[order]]
