"""Text embedders: the :class:`Embedder` seam and its fastembed implementation."""

from tribal_memory.embeddings.base import Embedder
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder, packaged_model_dir

__all__ = ["Embedder", "FastEmbedEmbedder", "packaged_model_dir"]
