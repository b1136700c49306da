"""A per-owner query adapter: a linear map of the query embedding learned from feedback.

Question-agnostic signals (usage priors, anchors) lift repeated questions but
barely move new ones; a map ``W`` (``d x d``, starting at the identity) of the
query vector can. It is fitted per owner on that owner's feedback events: for
each memory an agent reported used, ``W q`` should score it above the hits
shown with it but skipped and above random memories of the store (softmax
cross-entropy over cosines with a temperature, plus a penalty
``lambda * ||W - I||^2`` that keeps it near the identity), by full-batch Adam.
The search then looks for ``W q`` (normalised) in the vector index; the raw
``q`` stays the key of the cache and of past-query similarity.

Sources: Sanjeev & Troynikov, "Embedding Adapters" (Chroma Research, 2024);
Yoon et al., "Search-Adaptor: Embedding Customization for Information
Retrieval" (ACL 2024); Adam: Kingma & Ba (ICLR 2015).

Nothing here ranks memories: :class:`QueryAdapters` keeps each owner's fitted
map (SQL table ``query_adapters``, read back when its change counter moves)
and :meth:`QueryAdapters.apply` maps a query vector with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tribal_memory.embeddings.base import Vector

Matrix = np.ndarray
"""A float32 array of shape ``(d, d)``."""


@dataclass(frozen=True, slots=True)
class AdapterFit:
    """How to fit an adapter (the defaults are what ``bench learn`` measured best).

    Attributes:
        temperature: Softmax temperature over cosines (lower: sharper).
        penalty: Weight of ``||W - I||^2`` (higher: closer to the identity).
        steps: Full-batch Adam steps.
        learning_rate: Adam's step size.
        negatives: Random in-store memories per example, besides the skipped hits.
    """

    temperature: float = 0.1
    penalty: float = 0.2
    steps: int = 150
    learning_rate: float = 0.01
    negatives: int = 64


@dataclass(frozen=True, slots=True)
class Examples:
    """Training pairs: a query and the memory used for it among its negatives.

    Attributes:
        queries: ``(n, d)`` unit query vectors, one row per (event, used memory).
        candidates: ``(n, k, d)`` unit memory vectors; column 0 is the used
            memory, the others its negatives (shown but skipped, then random).
        mask: ``(n, k)`` bool, False for padding slots (rows have fewer negatives).
    """

    queries: np.ndarray
    candidates: np.ndarray
    mask: np.ndarray


def fit(examples: Examples, fit: AdapterFit = AdapterFit()) -> Matrix:
    """Fit ``W`` so that ``W q`` scores each row's column 0 above its other candidates.

    Minimises ``mean_n -log softmax_k(cos(W q_n, c_nk) / T)[0] + penalty * ||W - I||^2``
    with Adam from ``W = I``; the cosine uses unit ``c`` and the unnormalised
    ``W q`` (which stays near unit length under the penalty).

    Args:
        examples: At least one row; vectors of one dimension ``d``.
        fit: Temperature, penalty, steps, learning rate.

    Returns:
        ``W``, ``(d, d)`` float32.
    """
    # float32 and batched matrix products (BLAS): einsum in float64 was several times slower.
    q = examples.queries.astype(np.float32)
    c = examples.candidates.astype(np.float32)
    mask = examples.mask
    n, d = q.shape
    identity = np.eye(d, dtype=np.float32)
    w = identity.copy()
    first = np.zeros((1, c.shape[1]), dtype=np.float32)
    first[0, 0] = 1.0
    m1, m2 = np.zeros_like(w), np.zeros_like(w)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for step in range(1, fit.steps + 1):
        mapped = q @ w.T  # (n, d)
        logits = np.matmul(c, mapped[:, :, None])[:, :, 0] / fit.temperature  # (n, k)
        logits = np.where(mask, logits, -np.inf)
        logits -= logits.max(axis=1, keepdims=True)
        weights = np.exp(logits)
        weights /= weights.sum(axis=1, keepdims=True)
        error = np.where(mask, weights - first, 0.0).astype(np.float32)  # d loss / d logits
        grad_mapped = np.matmul(error[:, None, :], c)[:, 0, :] / (fit.temperature * n)
        grad = grad_mapped.T @ q + 2.0 * fit.penalty * (w - identity)
        m1 = beta1 * m1 + (1 - beta1) * grad
        m2 = beta2 * m2 + (1 - beta2) * grad * grad
        m1_hat = m1 / (1 - beta1**step)
        m2_hat = m2 / (1 - beta2**step)
        w -= fit.learning_rate * m1_hat / (np.sqrt(m2_hat) + eps)
    return w.astype(np.float32)


def apply(w: Matrix, vector: Vector) -> Vector:
    """``W q`` scaled to unit length (``q`` itself when the map sends it to zero)."""
    mapped = w @ np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(mapped))
    if not norm > 0:
        return np.asarray(vector, dtype=np.float32)
    result: Vector = (mapped / norm).astype(np.float32)
    return result
