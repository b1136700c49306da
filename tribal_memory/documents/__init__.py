"""Turning files into memories: documents (Markdown, text, PDF) and LoCoMo conversations.

Modules: :mod:`.index` (ingest, list and delete documents of a store),
:mod:`.parsing` (formats, metadata, heading hierarchy), :mod:`.chunking`
(sections and token-sized chunks), :mod:`.tokens` (the model's tokenizer),
:mod:`.pdf` (page text), :mod:`.chunk_context` (a chunk's neighbours and
headings), :mod:`.sync` (folders to owners, sync and watch), :mod:`.ingest` (files and
folders planned, then ingested or captured), :mod:`.locomo`.
"""

from tribal_memory.documents.locomo import LocomoQuestion, LocomoSample, iter_memories, load_locomo
from tribal_memory.documents.parsing import (
    DOCUMENT_SUFFIXES,
    LoadedFiles,
    doc_id_for,
    document_format,
    iter_paths,
    load_document,
    load_paths,
    parse_document,
)

__all__ = [
    "DOCUMENT_SUFFIXES",
    "LoadedFiles",
    "LocomoQuestion",
    "LocomoSample",
    "doc_id_for",
    "document_format",
    "iter_memories",
    "iter_paths",
    "load_document",
    "load_locomo",
    "load_paths",
    "parse_document",
]
