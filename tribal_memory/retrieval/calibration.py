"""Calibrated relevance: a hit's ``score`` as a probability that means the same across queries.

The ranking score of a search (:mod:`.fusion`, :mod:`.ranking`) is relative:
min-max normalisation gives the best candidate of any query, even a nonsense
one, a vector part of 1. The score a caller sees is instead the estimated
probability that the memory is evidence for the question, from a logistic
model (Platt, "Probabilistic outputs for support vector machines", 1999:
a sigmoid fitted to held-out labels) over four features of the hit:

- ``cosine``: its cosine similarity to the query (a memory found by BM25
  alone counts the lowest cosine among the vector candidates, the most it
  can have had);
- ``coverage``: the share of the question's content words (stop words
  dropped, Snowball stems) found in the memory;
- ``inverse_rank``: ``1 / rank`` in this search;
- ``top_cosine``: the best cosine of any vector candidate (how close the
  store comes to the question at all, the same for every hit of a query).

The weights are fitted by ``tribal-memory bench calibration --fit`` on
LoCoMo development conversations: every hit in the top 10 of a plain hybrid
search labelled 1 when it is one of the question's evidence turns, 0
otherwise, with each conversation's questions also asked of another
conversation's store and nonsense strings asked of every store (all hits 0).
:data:`DEFAULT_MODEL` holds the fitted weights; the command and result file
are in ``docs/benchmarks.md``.

What the learned layer knows counts as independent evidence (noisy-OR): a
hit with a positive learned gain ``g`` (``anchor_weight x anchor match +
feedback boost``, the gain the ranking added, capped at 1) scores
``1 - (1 - p)(1 - g)``, so a memory found by an anchor, or used before for
similar questions, keeps its place above ``min_score``. That part is the
ranking's own scale, not fitted; negative gains (skipped before) only reorder.

The order of the hits is the ranking's; the calibrated score need not fall
down the list (a rank-3 hit can be likelier evidence than the rank-1 one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from tribal_memory.base.results import Hit
from tribal_memory.learned.text import content_terms, stem

FEATURES: tuple[str, ...] = ("cosine", "coverage", "inverse_rank", "top_cosine")
"""The model's features, in weight order."""


@dataclass(frozen=True, slots=True)
class RelevanceModel:
    """Logistic relevance model: ``sigmoid(intercept + weights . features)``, in (0, 1).

    ``weights`` follow :data:`FEATURES`.
    """

    intercept: float
    weights: tuple[float, float, float, float]

    def probability(self, features: Sequence[float]) -> float:
        """The modelled probability that a hit with these features is relevant, in [0, 1)."""
        z = self.intercept + sum(w * x for w, x in zip(self.weights, features, strict=True))
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """:meth:`probability` of each row of ``x`` (shape ``(n, 4)``), shape ``(n,)``."""
        z = self.intercept + np.asarray(x, dtype=np.float64) @ np.asarray(self.weights)
        result: np.ndarray = 1.0 / (1.0 + np.exp(-z))
        return result


DEFAULT_MODEL = RelevanceModel(intercept=-7.478, weights=(1.495, 4.629, 1.658, 1.626))
"""Fitted by ``tribal-memory bench calibration --fit`` (see the module docstring)."""

DEFAULT_MIN_SCORE = 0.08
"""The ``min_score`` of ``/v1/context`` (a block put in front of every prompt,
unasked) when the caller gives none: chosen by ``bench calibration --fit`` on
its fit half (best Youden index)."""

DEFAULT_TOOL_MIN_SCORE = 0.02
"""The ``minScore`` of the agent's ``memory_search`` when the model gives none:
the lowest ``bench calibration`` grid value, which kept a hit for every
answerable question of both halves. An agent that asks wants the best there
is (a paraphrase scores low: "Where do I live now?" against "I moved to
Lisbon" is about 0.01); only the unasked context block abstains at 0.08."""


def query_stems(query: str) -> frozenset[str]:
    """Stems of the question's content words (stop and question words dropped)."""
    return frozenset(stem(w) for w in content_terms(query))


@lru_cache(maxsize=8192)
def _content_stems(content: str) -> frozenset[str]:
    """Stems of ``content``'s content words (cached: the same memories come back often)."""
    return frozenset(stem(w) for w in content_terms(content))


def coverage(stems: frozenset[str], content: str) -> float:
    """Share of ``stems`` found among the stems of ``content``'s words, in [0, 1] (0: no stems)."""
    if not stems:
        return 0.0
    return len(stems & _content_stems(content)) / len(stems)


def features(
    hit: Hit, stems: frozenset[str], cosine_range: tuple[float, float]
) -> tuple[float, float, float, float]:
    """The model's features of one hit (see the module docstring), in :data:`FEATURES` order.

    Args:
        hit: The hit, with its 1-based ``rank`` and raw ``cosine`` (None: not
            a vector candidate).
        stems: :func:`query_stems` of the question.
        cosine_range: (lowest, highest) cosine among the search's vector candidates.
    """
    low, high = cosine_range
    cosine = hit.cosine if hit.cosine is not None else low
    return (cosine, coverage(stems, hit.memory.content), 1.0 / hit.rank, high)


def learned_gain(hit: Hit, anchor_weight: float) -> float:
    """The gain the learned layer gave ``hit``: anchor match and feedback boost, in [0, 1]."""
    gain = anchor_weight * (hit.anchor_match or 0.0) + hit.boost
    return min(1.0, max(0.0, gain))


def calibrated(
    hits: Sequence[Hit],
    query: str,
    cosine_range: tuple[float, float],
    *,
    anchor_weight: float,
    model: RelevanceModel = DEFAULT_MODEL,
) -> list[Hit]:
    """``hits`` with ``score`` set to their calibrated relevance, order and ranks unchanged.

    Each hit's former score is kept as ``rank_score``; a learned gain is
    folded in by noisy-OR (see the module docstring).

    Args:
        hits: Ranked hits (rank 1..n) with their ranking ``score``.
        query: The question.
        cosine_range: (lowest, highest) cosine among the search's vector candidates.
        anchor_weight: The ``anchor_weight`` setting the ranking used.
        model: The relevance model.

    Returns:
        New hits, ``score`` in (0, 1].
    """
    stems = query_stems(query)
    out = []
    for hit in hits:
        p = model.probability(features(hit, stems, cosine_range))
        gain = learned_gain(hit, anchor_weight)
        out.append(replace(hit, score=1.0 - (1.0 - p) * (1.0 - gain), rank_score=hit.score))
    return out


def fit(x: np.ndarray, y: np.ndarray, *, l2: float = 1e-3, steps: int = 50) -> RelevanceModel:
    """Fit the logistic model by Newton's method (iteratively reweighted least squares).

    Args:
        x: Features, shape ``(n, 4)`` in :data:`FEATURES` order.
        y: Labels, shape ``(n,)``, 1 relevant and 0 not.
        l2: Ridge penalty on the weights (not the intercept).
        steps: Newton steps (the loss is convex; 50 is far past convergence).

    Returns:
        The fitted :class:`RelevanceModel`.

    Raises:
        ValueError: ``x`` and ``y`` disagree in length, or the labels are all one class.
    """
    if len(x) != len(y):
        raise ValueError(f"{len(x)} feature rows but {len(y)} labels")
    if len(set(np.asarray(y).tolist())) < 2:
        raise ValueError("the labels need both classes")
    design = np.column_stack([np.ones(len(x)), np.asarray(x, dtype=np.float64)])
    target = np.asarray(y, dtype=np.float64)
    w = np.zeros(design.shape[1])
    ridge = l2 * np.eye(len(w))
    ridge[0, 0] = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(design @ w)))
        gradient = design.T @ (p - target) + ridge @ w
        hessian = (design * (p * (1.0 - p))[:, None]).T @ design + ridge
        w -= np.linalg.solve(hessian, gradient)
    weights = tuple(round(float(v), 3) for v in w[1:])
    return RelevanceModel(round(float(w[0]), 3), weights)  # type: ignore[arg-type]
