"""The learned retrieval layer (DESIGN §4): cache, expansion, feedback, anchors, query adapter."""

from tribal_memory.learned.invalidation import forget_cached, forget_learned

__all__ = ["forget_cached", "forget_learned"]
