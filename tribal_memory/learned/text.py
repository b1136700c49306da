"""Normalising questions: tokens, content terms and the query-cache key.

The key of a query (DESIGN §4.1) is its lowercased words with punctuation
stripped, stop words removed, each word reduced by the Snowball English stemmer
(Porter, "Snowball: A language for stemming algorithms", 2001; nltk's
implementation) and the stems sorted, so "What food does Priya like?" and
"priya likes what food" share a key.

Question words (what, when, where, who, which, why, how) are deliberately *not*
stop words: "When did Ana move?" and "Where did Ana move?" must not share a
cache entry. The stop word list is written here (short English function words)
rather than taken from nltk's corpus, which would need a download at run time.
"""

from __future__ import annotations

import re
from functools import lru_cache

from nltk.stem.snowball import SnowballStemmer

QUESTION_WORDS: frozenset[str] = frozenset(
    {"what", "when", "where", "who", "whom", "whose", "which", "why", "how"}
)
"""Words that set what a question asks for; kept in cache keys."""

STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because
    been before being below between both but by can could did do does doing done
    down during each else ever few for from further had has have having he her
    here hers herself him himself his i if in into is it its itself just me
    might more most must my myself no nor not now of off on once only or other
    ought our ours ourselves out over own same shall she should so some such
    than that the their theirs them themselves then there these they this those
    through to too under until up upon us very was we were while will with would
    yet you your yours yourself yourselves s t d ll m re ve also really please
    tell me let remember
    """.split()  # noqa: SIM905  # a word list reads better as text
)
"""Function words dropped from keys and keyword variants (question words excluded)."""

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
_stemmer = SnowballStemmer("english")


def tokens(text: str) -> list[str]:
    """Lowercased words of ``text`` in order, punctuation stripped.

    Apostrophes inside a word are dropped ("Priya's" → "priyas" is avoided:
    the possessive ``'s`` is removed, giving "priya").
    """
    words: list[str] = []
    for match in _WORD.finditer(text.lower()):
        word = match.group(0).replace("’", "'")
        if word.endswith("'s"):
            word = word[:-2]
        words.append(word.replace("'", ""))
    return [w for w in words if w]


def content_terms(text: str, *, keep_question_words: bool = False) -> list[str]:
    """Words of ``text`` that are not stop words (question words dropped unless kept)."""
    return [
        w
        for w in tokens(text)
        if w not in STOP_WORDS and (keep_question_words or w not in QUESTION_WORDS)
    ]


def numbers(text: str) -> frozenset[str]:
    """The words of ``text`` that hold a digit ("PR 561045", "v2", "2023"), lowercased.

    Two questions that differ only in such a word ask about different things
    however close their embeddings are, so a reworded question hits the
    semantic cache only when its numbers are the cached question's.
    """
    return frozenset(w for w in tokens(text) if any(c.isdigit() for c in w))


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Snowball English stem of one lowercased word."""
    return str(_stemmer.stem(word))


def query_key(text: str) -> str:
    """The normalised cache key of a query: sorted stems of its content words.

    Question words are kept (see the module docstring). A query made only of
    stop words keys on all its words, so it still has a key; text with no
    words at all gives ``""``.
    """
    terms = content_terms(text, keep_question_words=True) or tokens(text)
    return " ".join(sorted(stem(t) for t in terms))


def rewording_of(query: str, past: str) -> bool:
    """Whether ``query`` reads as a rewording of ``past`` (for the semantic cache).

    Their numbers must be the same (see :func:`numbers`), and the content
    stems of one (question words included, as in :func:`query_key`) must all
    be among the other's. A rewording drops, adds or reorders words ("Ana
    move" for "When did Ana move?") but does not swap what it asks about
    ("support group" for "conference", "when" for "where"), however close the
    two embeddings are.
    """
    if numbers(query) != numbers(past):
        return False
    asked, known = set(query_key(query).split()), set(query_key(past).split())
    return asked <= known or known <= asked
