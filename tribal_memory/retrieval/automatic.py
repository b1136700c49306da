"""Mode ``automatic``: the search mode chosen from the query's wording.

Rules, tried in order (the first that matches decides):

1. ``title`` — the query names a section or chapter ("what does the deployment
   section say about rollbacks?", "in the chapter on classes ...").
2. ``summary`` — the query asks for an overview ("give me an overview of ...",
   "summarise ...", "what is the logging HOWTO about?").
3. ``hybrid`` — anything else.

Rules were tried on the development half of the documents benchmark's
questions (``benchmarks/automatic_rules.py``; docs/history.md, "the rules
of automatic"): quoted phrases and code identifiers -> ``text`` and "in the
<document> HOWTO/tutorial/reference" -> ``title`` lost to hybrid there and
were left out. The two rules above fire on no development question; they
are the issue's own examples. Each rule's reason is reported with the result.
"""

from __future__ import annotations

import re

from tribal_memory.base.results import SearchMode

_TITLE = re.compile(
    r"\b(?:section|sections|chapter|chapters)\b",
    re.IGNORECASE,
)
_SUMMARY = re.compile(
    r"\b(?:overview|summari[sz]e|summary|gist|main points|in a nutshell|tl;?dr)\b"
    r"|\bwhat\s+is\s+.+\s+about\b",
    re.IGNORECASE,
)

RULES: tuple[tuple[SearchMode, re.Pattern[str], str], ...] = (
    ("title", _TITLE, "the query names a section or chapter"),
    ("summary", _SUMMARY, "the query asks for an overview or summary"),
)
"""(mode, pattern, reason) in the order they are tried."""


def choose_mode(query: str) -> tuple[SearchMode, str]:
    """The mode for ``query`` and the reason, by the first matching rule of :data:`RULES`.

    Returns:
        ``(mode, reason)``; ``("hybrid", "no rule matched")`` when none matches.
    """
    for mode, pattern, reason in RULES:
        if pattern.search(query):
            return mode, reason
    return "hybrid", "no rule matched"
