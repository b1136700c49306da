"""Retrieval: plain hybrid search and the learned signals on top of it (DESIGN §3-4).

- :mod:`.fusion`: vector and BM25 candidates fused into one ranking.
- :mod:`.signals`: what the learned parts say of each memory for one query.
- :mod:`.ranking`: candidates plus signals into the final hits.
- :mod:`.pipeline`: :class:`Retriever`, the stages of one search in order.
- :mod:`.variants`: which owner gets ``learned`` or ``baseline`` (A/B).

The learned parts themselves, and how feedback updates them, live in
:mod:`tribal_memory.learned`.
"""

from tribal_memory.retrieval.pipeline import Retriever
from tribal_memory.retrieval.variants import VariantPins

__all__ = ["Retriever", "VariantPins"]
