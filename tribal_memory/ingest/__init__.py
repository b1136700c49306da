"""Turning files into memories: documents (Markdown, text) and LoCoMo conversations."""

from tribal_memory.ingest.documents import (
    DOCUMENT_SUFFIXES,
    LoadedFiles,
    doc_id_for,
    iter_paths,
    load_document,
    load_paths,
)
from tribal_memory.ingest.locomo import LocomoQuestion, LocomoSample, iter_memories, load_locomo

__all__ = [
    "DOCUMENT_SUFFIXES",
    "LoadedFiles",
    "LocomoQuestion",
    "LocomoSample",
    "doc_id_for",
    "iter_memories",
    "iter_paths",
    "load_document",
    "load_locomo",
    "load_paths",
]
