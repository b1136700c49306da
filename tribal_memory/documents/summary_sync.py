"""Keeping a document's summary memories in step with its sections.

Each heading section with chunks gets a ``kind="summary"`` memory, and the
document one more (:mod:`.summaries` makes the texts). A summary's content is
its label (``<path> § <heading path>``, or ``<path>`` for the document) and
the summary text on the next line; its metadata names what it summarises::

    {"summary_of": "section", "section": 3, "heading": "Guide > Install",
     "title": "Install", "level": 2, "method": "extractive", "source_hash": "<sha256>"}

Relations (DESIGN §7): a section's summary ``summarizes`` each chunk of the
section and ``has_subsection`` the summaries of the sections directly under
it (a section without text passes its children to the nearest enclosing
summarised section); the document's summary ``has_subsection`` the top ones.

Sync: the document's row records each summary with the SHA-256 of what it
summarises (``source_hash``: the section's heading path and text; for the
document, the section hashes). A section whose hash is unchanged, and whose
summary was made by the configured method, keeps its summary memory (the
same id, so what the learned layer knows about it stays) without being
summarised again; the others get new summaries, and summaries
no longer wanted are deleted with :meth:`Core.delete_many` (relations and
learned rows with them). Each summary's relations are then set to exactly
those above (:meth:`Core.set_relations`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tribal_memory.base.graph import RelationInput
from tribal_memory.base.models import SUMMARY_KIND, MemoryInput, memory_id_for
from tribal_memory.documents.chunking import Section
from tribal_memory.documents.parsing import ParsedDocument
from tribal_memory.documents.summaries import Summarizer, SummaryText
from tribal_memory.documents.summary_texts import (
    PreparedSummarizer,
    PreparedTexts,
    RecordingSummarizer,
    SummaryTexts,
)

if TYPE_CHECKING:
    from tribal_memory.core import Core

SUMMARIZES = "summarizes"
HAS_SUBSECTION = "has_subsection"
SUMMARY_RELATIONS: tuple[str, ...] = (SUMMARIZES, HAS_SUBSECTION)
_CAPTURE_BATCH = 64


@dataclass(frozen=True, slots=True)
class SummaryRecord:
    """A summary as the document's row records it (``section`` None: the document's)."""

    memory_id: str
    section: int | None
    source_hash: str


def summary_records(items: Sequence[dict[str, Any]] | None) -> list[SummaryRecord]:
    """The records of a row's ``summaries`` JSON."""
    return [
        SummaryRecord(item["memory_id"], item.get("section"), item.get("source_hash", ""))
        for item in items or []
    ]


@dataclass(frozen=True, slots=True)
class _Wanted:
    """One summary this version of the document has."""

    section: Section | None
    heading: str
    title: str
    body: str
    source_hash: str
    chunk_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SummarySyncResult:
    """The records to save and how many summary memories were added and deleted."""

    records: list[SummaryRecord]
    added: int
    removed: int


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _wanted(path: str, parsed: ParsedDocument, chunk_ids: Sequence[str]) -> list[_Wanted]:
    """The sections that get a summary (those with chunks), in document order."""
    by_section: dict[int, list[str]] = {}
    for item, memory_id in zip(parsed.chunks, chunk_ids, strict=True):
        by_section.setdefault(int(item.metadata["section"]), []).append(memory_id)
    wanted: list[_Wanted] = []
    for section in parsed.sections:
        ids = by_section.get(section.index)
        if not ids:
            continue
        body_from = section.first_line + (1 if section.level else 0)
        body = "\n".join(parsed.lines[body_from : section.last_line]).strip()
        title = section.heading.rsplit(" > ", 1)[-1] if section.heading else path
        wanted.append(
            _Wanted(
                section,
                section.heading,
                title,
                body,
                _sha(f"{section.heading}\n{body}"),
                tuple(dict.fromkeys(ids)),
            )
        )
    return wanted


def _label(path: str, heading: str) -> str:
    return f"{path} § {heading}" if heading else path


def _document_title(path: str, sections: Sequence[Section]) -> str:
    top = next((s for s in sections if s.level == 1), None)
    return top.heading if top is not None else path


class SummarySync:
    """Makes, keeps and deletes the summaries of one document at a time.

    Args:
        core: The open store; summaries are captured and deleted through it.
    """

    def __init__(self, core: Core) -> None:
        self.core = core

    def _method(self) -> str:
        """How summaries are made now: ``llm`` when configured with an endpoint."""
        settings = self.core.settings
        return "llm" if settings.summaries == "llm" and settings.llm_url else "extractive"

    def _kept(self, old: Sequence[SummaryRecord]) -> dict[tuple[bool, str], Any]:
        """Old summaries still stored and made by the current method, by (is document, hash)."""
        stored = self.core.store.get([r.memory_id for r in old])
        method = self._method()
        return {  # a summary made another way is made again (the method changed)
            (r.section is None, r.source_hash): stored[r.memory_id]
            for r in old
            if r.memory_id in stored and stored[r.memory_id].metadata.get("method") == method
        }

    def prepare(
        self,
        *,
        path: str,
        parsed: ParsedDocument,
        chunk_ids: Sequence[str],
        old: Sequence[SummaryRecord],
    ) -> PreparedTexts:
        """Make the summary texts :meth:`sync` will need, before the document lock is taken.

        This is where the LLM is called (up to ``summary_llm_timeout_s`` per
        call); it reads the store but writes nothing. Arguments as for
        :meth:`sync` (``old``: the records as read before the lock).

        Raises:
            EmbeddingError: the model failed on the sentences.
        """
        sections = _wanted(path, parsed, chunk_ids)
        kept = self._kept(old)
        recorder = RecordingSummarizer(Summarizer(self.core.settings, self.core.embedder))
        try:
            texts, use_llm = self._section_texts(sections, kept, recorder)
            bodies = [
                text.text if text is not None else _body(kept[(False, want.source_hash)].content)
                for want, text in zip(sections, texts, strict=True)
                if text is None or text.text
            ]
            doc_hash = _sha("\n".join(w.source_hash for w in sections))
            if bodies and (True, doc_hash) not in kept:
                title = _document_title(path, parsed.sections)
                recorder.document_summary(title, bodies, use_llm=use_llm)
        finally:
            recorder.close()
        return recorder.prepared

    def sync(
        self,
        *,
        owner: str,
        path: str,
        doc_id: str,
        parsed: ParsedDocument,
        chunk_ids: Sequence[str],
        old: Sequence[SummaryRecord],
        prepared: PreparedTexts | None = None,
    ) -> SummarySyncResult:
        """Bring the summaries of ``owner``'s document ``path`` in step with ``parsed``.

        Args:
            owner: The document's owner (and its summaries').
            path: The document's path.
            doc_id: Its id.
            parsed: This version's sections, lines and chunks.
            chunk_ids: The ids of ``parsed.chunks``, in order.
            old: The summaries the document's row recorded (empty: none).
            prepared: Texts from :meth:`prepare`: then no LLM is called here,
                and a text it lacks is made extractively. None: texts are
                made here (the LLM too, when configured).

        Returns:
            The records to save in the row, and the counts.

        Raises:
            EmbeddingError / StoreUnavailable: as capture; the row is left as
                it was, so ingesting again retries.
        """
        sections = _wanted(path, parsed, chunk_ids)
        doc_hash = _sha("\n".join(w.source_hash for w in sections))
        kept = self._kept(old)
        settings, embedder = self.core.settings, self.core.embedder
        summarizer: SummaryTexts = (  # one LLM client per document
            Summarizer(settings, embedder)
            if prepared is None
            else PreparedSummarizer(prepared, Summarizer(settings, embedder, llm=False))
        )
        try:
            texts, use_llm = self._section_texts(sections, kept, summarizer)
            ids, records, bodies, inputs = self._sections(
                owner, path, doc_id, sections, texts, kept
            )
            document_id = self._document(
                owner, path, doc_id, parsed, bodies, doc_hash, kept, inputs, (summarizer, use_llm)
            )
        finally:
            summarizer.close()
        if document_id is not None:
            records.append(SummaryRecord(document_id, None, doc_hash))
        added = self._capture(inputs)
        self._link(parsed.sections, sections, ids, document_id)
        keep = {r.memory_id for r in records}
        gone = [r.memory_id for r in old if r.memory_id not in keep]
        removed = self.core.delete_many(list(dict.fromkeys(gone))) if gone else 0
        return SummarySyncResult(records, added, removed)

    def _sections(
        self,
        owner: str,
        path: str,
        doc_id: str,
        sections: Sequence[_Wanted],
        texts: Sequence[SummaryText | None],
        kept: dict[tuple[bool, str], Any],
    ) -> tuple[list[str | None], list[SummaryRecord], list[str], list[MemoryInput]]:
        """Each section's summary id (kept or new), its record, its text, and the new inputs."""
        ids: list[str | None] = []
        inputs: list[MemoryInput] = []
        records: list[SummaryRecord] = []
        bodies: list[str] = []
        for want, text in zip(sections, texts, strict=True):
            assert want.section is not None
            meta = {
                "summary_of": "section",
                "section": want.section.index,
                "heading": want.heading,
                "title": want.title,
                "level": want.section.level,
            }
            kept_memory = kept.get((False, want.source_hash))
            memory_id = self._keep_or_make(
                owner, path, doc_id, want, text, meta, kept_memory, inputs
            )
            ids.append(memory_id)
            if memory_id is not None:
                records.append(SummaryRecord(memory_id, want.section.index, want.source_hash))
                if text is not None:
                    bodies.append(text.text)
                elif kept_memory is not None:
                    bodies.append(_body(kept_memory.content))
        return ids, records, bodies, inputs

    def _section_texts(
        self,
        sections: Sequence[_Wanted],
        kept: dict[tuple[bool, str], Any],
        summarizer: SummaryTexts,
    ) -> tuple[list[SummaryText | None], bool]:
        """New summary texts of the sections whose summary cannot be kept (None: kept).

        Also whether the LLM may still be asked (False once a call failed).
        """
        todo = [i for i, w in enumerate(sections) if (False, w.source_hash) not in kept]
        texts: list[SummaryText | None] = [None] * len(sections)
        if not todo:
            return texts, True
        made, use_llm = summarizer.section_summaries(
            [(sections[i].heading, sections[i].body) for i in todo]
        )
        for i, text in zip(todo, made, strict=True):
            texts[i] = text
        return texts, use_llm

    def _keep_or_make(
        self,
        owner: str,
        path: str,
        doc_id: str,
        want: _Wanted,
        text: SummaryText | None,
        meta: dict[str, Any],
        existing: Any,
        inputs: list[MemoryInput],
    ) -> str | None:
        """The id of this summary: the kept memory (placement updated) or a new input."""
        if text is None:
            wanted_meta = {**existing.metadata, **meta}
            if existing.metadata != wanted_meta:
                updated = dataclasses.replace(
                    existing, metadata=wanted_meta, updated_at=datetime.now(UTC)
                )
                self.core.store.replace(updated, None)
                self.core.forget_cached([existing.memory_id])
            return str(existing.memory_id)
        if not text.text:
            return None
        content = f"{_label(path, want.heading)}\n{text.text}"
        inputs.append(
            MemoryInput(
                content=content,
                owner=owner,
                kind=SUMMARY_KIND,
                source=path,
                doc_id=doc_id,
                metadata={**meta, "method": text.method, "source_hash": want.source_hash},
            )
        )
        return memory_id_for(owner.strip(), content.strip())

    def _document(
        self,
        owner: str,
        path: str,
        doc_id: str,
        parsed: ParsedDocument,
        texts: Sequence[str],
        doc_hash: str,
        kept: dict[tuple[bool, str], Any],
        inputs: list[MemoryInput],
        asking: tuple[SummaryTexts, bool],
    ) -> str | None:
        """The id of the document's summary (kept or new; None: no section has one).

        ``texts``: the section summaries' texts, in document order; ``asking``:
        the summarizer, and whether it may still ask the LLM.
        """
        if not texts:
            return None
        title = _document_title(path, parsed.sections)
        meta = {"summary_of": "document", "section": None, "heading": "", "title": title}
        whole = _Wanted(None, "", title, "", doc_hash, ())
        existing = kept.get((True, doc_hash))
        if existing is not None:
            return self._keep_or_make(owner, path, doc_id, whole, None, meta, existing, inputs)
        summarizer, use_llm = asking
        text = summarizer.document_summary(title, texts, use_llm=use_llm)
        if text is None:
            return None
        return self._keep_or_make(owner, path, doc_id, whole, text, meta, None, inputs)

    def _capture(self, inputs: Sequence[MemoryInput]) -> int:
        batch = min(_CAPTURE_BATCH, self.core.settings.max_batch_size)
        created = 0
        for offset in range(0, len(inputs), batch):
            part = inputs[offset : offset + batch]
            results = self.core.capture_batch(part, near_duplicates=False)
            created += sum(result.status == "created" for result in results)
        return created

    def _link(
        self,
        all_sections: Sequence[Section],
        sections: Sequence[_Wanted],
        ids: Sequence[str | None],
        document_id: str | None,
    ) -> None:
        """Set the summaries' ``summarizes`` and ``has_subsection`` relations."""
        by_section: dict[int, str] = {}
        edges: list[RelationInput] = []
        for want, memory_id in zip(sections, ids, strict=True):
            assert want.section is not None
            if memory_id is None:
                continue
            by_section[want.section.index] = memory_id
            edges += [RelationInput(memory_id, chunk, SUMMARIZES, 1.0) for chunk in want.chunk_ids]
        enclosing = {section.index: section.enclosing for section in all_sections}
        sources = [i for i in ids if i is not None]
        for want, memory_id in zip(sections, ids, strict=True):
            assert want.section is not None
            if memory_id is None:
                continue
            parent = enclosing.get(want.section.index)
            while parent is not None and parent not in by_section:
                parent = enclosing.get(parent)
            parent_id = by_section[parent] if parent is not None else document_id
            if parent_id is not None and parent_id != memory_id:
                edges.append(RelationInput(parent_id, memory_id, HAS_SUBSECTION, 1.0))
        if document_id is not None:
            sources.append(document_id)
        self.core.set_relations(sources, SUMMARY_RELATIONS, edges)


def _body(content: str) -> str:
    """The summary text of a summary memory's content (its label line dropped)."""
    return content.split("\n", 1)[1] if "\n" in content else content
