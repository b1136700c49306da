"""QueryExpander: keyword variants of a question (DESIGN §4.2).

Three sources, each searched on the BM25 path and fused by the caller:

Rule-based (:func:`rule_variants`), written for how agents ask about people
(the plain keyword form of a question — question and stop words dropped — is
not a variant: the BM25 path drops stop words itself, so it would repeat the
query's own search):
  * likes: "what X do(es) <who> like/love/enjoy/prefer" and "<who>'s favo(u)rite X"
    → "<who> X preference", "<who> favorite X", "<who> likes X";
  * whereabouts: "where does <who> live/work/study" → "<who> lives in",
    "<who> works at", "<who> studies at";
  * time: "when did/was/is ..." → the keywords plus "date";
  * counting: "how many/much X" → the keywords plus "number of X".

Learned (:class:`LearnedExpansions`): content words of memories that were used
for past queries, stored per query key; for a new query the words of similar
past queries, weighted by similarity and use, form one variant (a form of
relevance feedback, Rocchio 1971, restricted to memories reported used).

LLM (:class:`LlmVariants`): any OpenAI-compatible ``/chat/completions``
endpoint, asked for short keyword rewrites; bounded in time, and any failure is
an :class:`ExpansionUnavailable` the caller counts and ignores.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from tribal_memory.base.db import Database
from tribal_memory.base.tables import QueryExpansionRow
from tribal_memory.learned.llm import ChatClient, LlmUnavailable
from tribal_memory.learned.memo import RowsByKey, sql_rows
from tribal_memory.learned.query_cache import PastQuery
from tribal_memory.learned.text import content_terms, tokens

_LIKE = re.compile(
    r"\bwhat\s+(?:kinds?\s+of\s+|types?\s+of\s+|sorts?\s+of\s+)?(?P<thing>[\w\s-]+?)\s+"
    r"(?:do|does|did)\s+(?P<who>[\w\s'-]+?)\s+(?:like|love|enjoy|prefer)\b",
    re.IGNORECASE,
)
_FAVORITE = re.compile(
    r"\b(?P<who>[\w-]+)(?:'s|’s)\s+favou?rite\s+(?P<thing>[\w\s-]+?)(?:\?|$|\s+(?:is|was)\b)",
    re.IGNORECASE,
)
_WHERE = re.compile(
    r"\bwhere\s+(?:do|does|did)\s+(?P<who>[\w\s'-]+?)\s+(?P<verb>live|work|study)\b",
    re.IGNORECASE,
)
_WHERE_VERBS = {"live": "lives in", "work": "works at", "study": "studies at"}
_WHEN = re.compile(r"^\s*when\s+(?:did|was|is|were|will|does|do)\b", re.IGNORECASE)
_HOW_MANY = re.compile(r"\bhow\s+(?:many|much)\s+(?P<thing>[\w-]+)", re.IGNORECASE)


class ExpansionUnavailable(Exception):
    """The LLM expansion endpoint failed or timed out (the caller falls back)."""


def _keywords(text: str) -> str:
    return " ".join(content_terms(text))


def rule_variants(question: str) -> list[str]:
    """Rule-based keyword variants of ``question``, most specific first, no duplicates.

    The question itself is never among them; a question that is all stop
    words gives [].
    """
    variants: list[str] = []
    keywords = _keywords(question)
    for match in _LIKE.finditer(question):
        who, thing = _keywords(match["who"]), _keywords(match["thing"])
        if thing:
            variants += [f"{who} {thing} preference", f"{who} favorite {thing}"]
            variants.append(f"{who} likes {thing}")
    for match in _FAVORITE.finditer(question):
        who, thing = _keywords(match["who"]), _keywords(match["thing"])
        if thing:
            variants += [f"{who} likes {thing}", f"{who} {thing} preference"]
    for match in _WHERE.finditer(question):
        who = _keywords(match["who"])
        variants.append(f"{who} {_WHERE_VERBS[match['verb'].lower()]}")
    if _WHEN.search(question) and keywords:
        variants.append(f"{keywords} date")
    for match in _HOW_MANY.finditer(question):
        variants.append(f"{keywords} number of {match['thing']}")
    seen = {" ".join(tokens(question))}
    unique: list[str] = []
    for variant in variants:
        variant = " ".join(variant.split())
        normal = " ".join(tokens(variant))
        if normal and normal not in seen:
            seen.add(normal)
            unique.append(variant)
    return unique


class LearnedExpansions:
    """The ``query_expansions`` table: words of used memories per query key.

    Args:
        db: The SQL database.
        terms_per_use: Most words learned from one used memory.
    """

    def __init__(self, db: Database, *, terms_per_use: int = 8) -> None:
        self._db = db
        self.terms_per_use = terms_per_use
        self._words: RowsByKey[tuple[str, float]] = sql_rows(
            db,
            QueryExpansionRow,
            [QueryExpansionRow.expansion, QueryExpansionRow.weight],
            lambda values: (values[0], values[1]),
        )

    def learn(self, owner: str, key: str, query: str, used_contents: Sequence[str]) -> None:
        """Add the content words of ``used_contents`` missing from ``query`` under ``key``."""
        if not key or not used_contents:
            return
        asked = set(content_terms(query, keep_question_words=True))
        counts: Counter[str] = Counter()
        for content in used_contents:
            words = [w for w in content_terms(content) if w not in asked and len(w) > 2]
            counts.update(dict.fromkeys(words[: self.terms_per_use * 4], 1))
        learned = [w for w, _ in counts.most_common(self.terms_per_use)]
        if not learned:
            return
        with self._db.session() as session:
            for word in learned:
                row = session.get(QueryExpansionRow, (owner, key, word))
                if row is None:
                    row = QueryExpansionRow(owner=owner, query_key=key, expansion=word, weight=0.0)
                    session.add(row)
                row.weight += 1.0

    def variant(
        self,
        owner: str,
        similar: Sequence[PastQuery],
        *,
        min_similarity: float,
        limit: int,
        generation: int | None = None,
    ) -> str | None:
        """One keyword variant from the words learned for similar past queries, or None.

        Words score ``sum(similarity * weight)`` over the past queries with
        similarity >= ``min_similarity``; the best ``limit`` are joined.
        ``generation``: the owner's ``query_cache:<owner>`` counter as just
        read; while it is unchanged a past query's words are read once. None:
        always read them.
        """
        relevant = {q.key: q.similarity for q in similar if q.similarity >= min_similarity}
        if not relevant:
            return None
        scores: dict[str, float] = {}
        for key, rows in self._words.get(owner, list(relevant), generation).items():
            for word, weight in rows:
                scores[word] = scores.get(word, 0.0) + relevant[key] * weight
        words = sorted(scores, key=lambda w: (-scores[w], w))[:limit]
        return " ".join(words) if words else None


class LlmVariants:
    """Keyword rewrites of a question from an OpenAI-compatible chat endpoint.

    Args:
        url: Base URL, e.g. ``http://127.0.0.1:11434/v1`` (``/chat/completions`` is appended).
        model: Model name sent with the request.
        api_key: Bearer token, if the endpoint needs one.
        timeout_s: Longest wait for the whole call, in seconds.
    """

    PROMPT = (
        "Rewrite the question as up to 3 short keyword search queries for a notes "
        "database, one per line, no numbering, no explanations."
    )

    def __init__(
        self, url: str, model: str, *, api_key: str | None = None, timeout_s: float = 2.0
    ) -> None:
        self._chat = ChatClient(url, model, api_key=api_key, timeout_s=timeout_s)
        self.endpoint = self._chat.endpoint
        self.model = model
        self.timeout_s = timeout_s

    def __call__(self, question: str) -> list[str]:
        """Up to 3 variants of ``question`` (never the question itself).

        Raises:
            ExpansionUnavailable: the call failed, timed out or returned no usable text.
        """
        try:
            text = self._chat.complete(self.PROMPT, question)
        except LlmUnavailable as exc:
            raise ExpansionUnavailable(f"LLM expansion {exc}") from exc
        asked = " ".join(tokens(question))
        variants = []
        for line in text.splitlines():
            line = line.strip().lstrip("-*0123456789.) ").strip()
            if line and " ".join(tokens(line)) != asked:
                variants.append(line[:200])
        if not variants:
            raise ExpansionUnavailable("LLM expansion returned no usable variant")
        return variants[:3]

    def close(self) -> None:
        """Close the HTTP connection pool (a call still running is abandoned)."""
        self._chat.close()
