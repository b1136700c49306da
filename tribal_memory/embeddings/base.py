"""The embedder seam: one abstract batch method, the rest derived."""

from __future__ import annotations

import abc
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]
"""A float32 array; 1-d of shape ``(dim,)`` or 2-d of shape ``(n, dim)``."""


def unit_rows(matrix: npt.ArrayLike) -> Vector:
    """The rows of ``matrix`` (shape ``(n, dim)``) scaled to length 1, as a new float32 array.

    A zero row stays zero (its length is taken as at least 1e-12).
    """
    rows = np.asarray(matrix, dtype=np.float32)
    lengths = np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    return np.asarray(rows / lengths, dtype=np.float32)


class Embedder(abc.ABC):
    """Turns texts into L2-normalised float32 vectors.

    Implementations set :attr:`model_id` (a stable name recorded in the store)
    and :attr:`dim`, and implement :meth:`embed_batch`.
    """

    model_id: str
    dim: int

    @abc.abstractmethod
    def embed_batch(self, texts: Sequence[str], *, query: bool = False) -> Vector:
        """Embed ``texts`` in order.

        Args:
            texts: Strings to embed; long ones are truncated by the model's
                tokenizer (256 tokens for all-MiniLM-L6-v2).
            query: True when the texts are search queries (models with a query
                prefix, such as BGE, add it).

        Returns:
            Array of shape ``(len(texts), dim)``, rows L2-normalised, so the dot
            product of two rows is their cosine similarity in [-1, 1]. An empty
            input gives shape ``(0, dim)``.

        Raises:
            EmbeddingError: the model failed on the input.
        """

    def embed(self, text: str, *, query: bool = False) -> Vector:
        """Embed one text; shape ``(dim,)``. See :meth:`embed_batch`."""
        row: Vector = self.embed_batch([text], query=query)[0]
        return row
