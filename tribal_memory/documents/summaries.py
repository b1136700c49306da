"""Section and document summaries: extractive by embedding centrality, or from an LLM.

Extractive (the default, no network): a section's sentences are embedded with
the store's model and the ``summary_sentences`` sentences most similar to
their mean vector are kept, in document order, within ``summary_max_chars``
characters (centroid-based extractive summarisation, Radev et al. 2004,
"Centroid-based summarization of multiple documents"). A section of at most
that many sentences is its own summary; one without any sentence (code only)
is summarised by its first characters. The document's summary is made the
same way from the sentences of its sections' summaries.

LLM (``TRIBAL_SUMMARIES=llm`` with ``TRIBAL_LLM_URL`` set): one chat
completion per section (and one for the document, given the section
summaries), each bounded by ``summary_llm_timeout_s``. Any failure falls back
to the extractive summary, and after one failure the rest of the document is
summarised extractively (a dead endpoint costs one timeout per document).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from tribal_memory.base.config import Settings
from tribal_memory.embeddings.base import Embedder
from tribal_memory.learned.llm import ChatClient, LlmUnavailable

logger = logging.getLogger(__name__)

SummaryMethod = Literal["extractive", "llm"]

MAX_SENTENCES_EMBEDDED = 64
"""Most sentences of one section embedded (evenly spaced when it has more)."""
MAX_SENTENCE_CHARS = 300
"""A longer sentence is cut here (with an ellipsis)."""
MAX_LLM_INPUT_CHARS = 6000
"""Most characters of a section's text sent to the LLM."""

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[`*_]?[A-Z0-9])")
_LIST_MARK = re.compile(r"^\s*(?:[-*+>]|\d+[.)])\s+")
_MARKUP = re.compile(r"[*_`]{1,3}")
_SPACE = re.compile(r"\s+")


def sentences(text: str) -> list[str]:
    """The prose sentences of Markdown ``text``, in order.

    Fenced code, headings and table rows are dropped; paragraphs (blocks of
    non-blank lines) are split after ``.``, ``!`` or ``?`` followed by a
    capital or a digit. Sentences of fewer than 3 words or 20 characters
    are dropped; longer ones than :data:`MAX_SENTENCE_CHARS` cut.
    """
    paragraphs: list[list[str]] = [[]]
    fence: str | None = None
    for line in text.splitlines():
        if match := _FENCE.match(line):
            marker = match.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
            paragraphs.append([])
            continue
        stripped = line.strip()
        if fence is not None or not stripped or stripped.startswith(("#", "|")):
            paragraphs.append([])
            continue
        if _LIST_MARK.match(line):
            paragraphs.append([])
        paragraphs[-1].append(_LIST_MARK.sub("", stripped))
    found: list[str] = []
    for paragraph in paragraphs:
        joined = _SPACE.sub(" ", _MARKUP.sub("", " ".join(paragraph))).strip()
        for sentence in _SENTENCE_END.split(joined):
            sentence = sentence.strip()
            if len(sentence) < 20 or len(sentence.split()) < 3:
                continue
            if len(sentence) > MAX_SENTENCE_CHARS:
                sentence = sentence[: MAX_SENTENCE_CHARS - 1].rstrip() + "…"
            found.append(sentence)
    return found


def _fit(chosen: Sequence[str], max_chars: int) -> str:
    """``chosen`` joined with spaces, cut to ``max_chars`` characters."""
    text = " ".join(chosen)
    return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + "…"


def _sampled(items: Sequence[str], most: int) -> list[int]:
    """Indexes of at most ``most`` of ``items``, evenly spaced, in order."""
    if len(items) <= most:
        return list(range(len(items)))
    return sorted({round(i * (len(items) - 1) / (most - 1)) for i in range(most)})


@dataclass(frozen=True, slots=True)
class SummaryText:
    """A summary's text and how it was made."""

    text: str
    method: SummaryMethod


class Summarizer:
    """Makes summary texts for the sections of a document, then the document's.

    Args:
        settings: ``summaries`` (the method), ``summary_sentences``,
            ``summary_max_chars``, and for ``llm`` ``llm_url``, ``llm_model``,
            ``llm_api_key`` and ``summary_llm_timeout_s``.
        embedder: The model sentences are embedded with (the store's).
        chat: The LLM client (None: built from settings when ``summaries`` is
            ``llm`` and ``llm_url`` is set).
        llm: False: never build an LLM client from settings (extractive only).
    """

    SECTION_PROMPT = (
        "Summarise this section of a document in at most {n} sentences of plain prose "
        "(no lists, no preamble), keeping its key terms."
    )
    DOCUMENT_PROMPT = (
        "Given the summaries of a document's sections, summarise the whole document in "
        "at most {n} sentences of plain prose (no lists, no preamble)."
    )

    def __init__(
        self,
        settings: Settings,
        embedder: Embedder,
        chat: ChatClient | None = None,
        *,
        llm: bool = True,
    ) -> None:
        self.sentences = settings.summary_sentences
        self.max_chars = settings.summary_max_chars
        self._embedder = embedder
        self._chat = chat
        if chat is None and llm and settings.summaries == "llm" and settings.llm_url:
            self._chat = ChatClient(
                settings.llm_url,
                settings.llm_model or "default",
                api_key=settings.llm_api_key,
                timeout_s=settings.summary_llm_timeout_s,
                max_tokens=400,
            )

    def close(self) -> None:
        """Close the LLM client, if any."""
        if self._chat is not None:
            self._chat.close()

    def section_summaries(
        self, sections: Sequence[tuple[str, str]]
    ) -> tuple[list[SummaryText], bool]:
        """Summaries of ``sections`` (``(heading path, Markdown text)`` each), in order.

        Returns:
            The summaries (empty text for a section with no text), and whether
            the LLM may still be asked (False once a call failed, or without one).

        Raises:
            EmbeddingError: the model failed on the sentences.
        """
        texts = self.extractive([body for _, body in sections])
        use_llm = self._chat is not None
        for index, (heading, body) in enumerate(sections):
            if not use_llm or not texts[index].text:
                continue
            prompt = self.SECTION_PROMPT.format(n=self.sentences)
            answer = self._ask(prompt, f"{heading}\n\n{body[:MAX_LLM_INPUT_CHARS]}")
            if answer is None:
                use_llm = False
            else:
                texts[index] = answer
        return texts, use_llm

    def document_summary(
        self, title: str, summaries: Sequence[str], *, use_llm: bool = True
    ) -> SummaryText | None:
        """The document's summary from its sections' summaries (None: there are none).

        Raises:
            EmbeddingError: the model failed on the sentences.
        """
        summaries = [text for text in summaries if text]
        if not summaries:
            return None
        if use_llm and self._chat is not None:
            listing = "\n".join(f"- {text}" for text in summaries)
            prompt = self.DOCUMENT_PROMPT.format(n=self.sentences)
            answer = self._ask(prompt, f"{title}\n\n{listing[:MAX_LLM_INPUT_CHARS]}")
            if answer is not None:
                return answer
        return self.extractive(["\n\n".join(summaries)])[0]

    def _ask(self, prompt: str, text: str) -> SummaryText | None:
        """The LLM's summary of ``text`` (None: it failed; logged)."""
        assert self._chat is not None
        try:
            answer = self._chat.complete(prompt, text)
        except LlmUnavailable as exc:
            logger.warning("LLM summary %s; summarising extractively", exc)
            return None
        return SummaryText(_fit([_SPACE.sub(" ", answer).strip()], self.max_chars), "llm")

    def extractive(self, bodies: Sequence[str]) -> list[SummaryText]:
        """The extractive summary of each of ``bodies`` (see the module docstring).

        The sentences of every body that needs ranking are embedded in one batch.

        Raises:
            EmbeddingError: the model failed on the sentences.
        """
        split = [sentences(body) for body in bodies]
        ranked = [i for i, found in enumerate(split) if len(found) > self.sentences]
        picks = {i: _sampled(split[i], MAX_SENTENCES_EMBEDDED) for i in ranked}
        batch = [split[i][j] for i in ranked for j in picks[i]]
        vectors = self._embedder.embed_batch(batch) if batch else None
        offset = 0
        results: list[SummaryText] = []
        for index, found in enumerate(split):
            if index in picks:
                assert vectors is not None
                chosen = self._central(
                    [found[j] for j in picks[index]],
                    vectors[offset : offset + len(picks[index])],
                )
                offset += len(picks[index])
            elif found:
                chosen = found
            else:
                chosen = [_SPACE.sub(" ", bodies[index]).strip()]
            results.append(SummaryText(_fit(chosen, self.max_chars), "extractive"))
        return results

    def _central(self, candidates: Sequence[str], vectors: np.ndarray) -> list[str]:
        """The most central of ``candidates`` (cosine to their mean), in document order.

        Taken best first while they fit in ``max_chars`` (the best always).
        """
        centroid = vectors.mean(axis=0)
        centrality = vectors @ (centroid / max(float(np.linalg.norm(centroid)), 1e-12))
        order = sorted(range(len(candidates)), key=lambda i: (-float(centrality[i]), i))
        kept: list[int] = []
        used = 0
        for i in order:
            size = len(candidates[i]) + (1 if kept else 0)
            if kept and used + size > self.max_chars:
                continue
            kept.append(i)
            used += size
            if len(kept) == self.sentences:
                break
        return [candidates[i] for i in sorted(kept)]
