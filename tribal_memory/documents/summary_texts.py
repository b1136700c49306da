"""Summary texts made before a document's lock is taken, and served from there under it.

An LLM summary may wait ``summary_llm_timeout_s`` per call. Ingest makes the
texts first, outside the document lock (:meth:`.summary_sync.SummarySync.prepare`
through a :class:`RecordingSummarizer`), and the sync under the lock reads
them back (:class:`PreparedSummarizer`), so one owner's slow LLM never holds
up another owner's ingest. Texts are keyed by what they summarise (heading
and text of a section; title and section summaries of the document), so a
text is reused only for the same input; anything else (another ingest of the
same document ran meanwhile) is summarised extractively under the lock,
which needs no network.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tribal_memory.documents.summaries import Summarizer, SummaryText


class SummaryTexts(Protocol):
    """What :class:`.summary_sync.SummarySync` asks for summary texts (as :class:`Summarizer`)."""

    def section_summaries(
        self, sections: Sequence[tuple[str, str]]
    ) -> tuple[list[SummaryText], bool]:
        """See :meth:`Summarizer.section_summaries`."""
        ...

    def document_summary(
        self, title: str, summaries: Sequence[str], *, use_llm: bool = True
    ) -> SummaryText | None:
        """See :meth:`Summarizer.document_summary`."""
        ...

    def close(self) -> None:
        """Release the LLM client, if any."""
        ...


def _key(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


@dataclass(slots=True)
class PreparedTexts:
    """Summary texts made ahead, by what they summarise.

    ``sections``: by heading and text; ``documents``: by title and section
    summaries (None: there was nothing to summarise); ``use_llm``: whether
    the LLM still answered at the end.
    """

    sections: dict[str, SummaryText] = field(default_factory=dict)
    documents: dict[str, SummaryText | None] = field(default_factory=dict)
    use_llm: bool = True


class RecordingSummarizer:
    """A :class:`Summarizer` that keeps every text it makes in :attr:`prepared`."""

    def __init__(self, summarizer: Summarizer) -> None:
        self._summarizer = summarizer
        self.prepared = PreparedTexts()

    def section_summaries(
        self, sections: Sequence[tuple[str, str]]
    ) -> tuple[list[SummaryText], bool]:
        """See :meth:`Summarizer.section_summaries` (may call the LLM)."""
        texts, use_llm = self._summarizer.section_summaries(sections)
        for (heading, body), text in zip(sections, texts, strict=True):
            self.prepared.sections[_key(heading, body)] = text
        self.prepared.use_llm = use_llm
        return texts, use_llm

    def document_summary(
        self, title: str, summaries: Sequence[str], *, use_llm: bool = True
    ) -> SummaryText | None:
        """See :meth:`Summarizer.document_summary` (may call the LLM)."""
        text = self._summarizer.document_summary(title, summaries, use_llm=use_llm)
        self.prepared.documents[_key(title, *summaries)] = text
        return text

    def close(self) -> None:
        """Close the wrapped summarizer's LLM client."""
        self._summarizer.close()


class PreparedSummarizer:
    """Texts from ``prepared``; what it lacks from ``fallback`` (build it without an LLM)."""

    def __init__(self, prepared: PreparedTexts, fallback: Summarizer) -> None:
        self._prepared = prepared
        self._fallback = fallback

    def section_summaries(
        self, sections: Sequence[tuple[str, str]]
    ) -> tuple[list[SummaryText], bool]:
        """The prepared texts; any missing made by the fallback (never the LLM).

        Raises:
            EmbeddingError: the model failed on a missing section's sentences.
        """
        found = [self._prepared.sections.get(_key(heading, body)) for heading, body in sections]
        missing = [i for i, text in enumerate(found) if text is None]
        if missing:
            made, _ = self._fallback.section_summaries([sections[i] for i in missing])
            for i, text in zip(missing, made, strict=True):
                found[i] = text
        texts = [text for text in found if text is not None]
        return texts, self._prepared.use_llm and not missing

    def document_summary(
        self, title: str, summaries: Sequence[str], *, use_llm: bool = True
    ) -> SummaryText | None:
        """The prepared text for these summaries, else the fallback's."""
        key = _key(title, *summaries)
        if key in self._prepared.documents:
            return self._prepared.documents[key]
        return self._fallback.document_summary(title, summaries, use_llm=False)

    def close(self) -> None:
        """Close the fallback (it holds no LLM client when built with ``llm=False``)."""
        self._fallback.close()
