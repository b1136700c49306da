"""Turning files into memories: documents (Markdown, text) and LoCoMo conversations."""

from tribal_memory.ingest.documents import (
    DOCUMENT_SUFFIXES,
    doc_id_for,
    iter_paths,
    load_document,
)
from tribal_memory.ingest.locomo import LocomoQuestion, LocomoSample, iter_memories, load_locomo

__all__ = [
    "DOCUMENT_SUFFIXES",
    "LocomoQuestion",
    "LocomoSample",
    "doc_id_for",
    "iter_memories",
    "iter_paths",
    "load_document",
    "load_locomo",
]
