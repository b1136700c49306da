"""Candidate rules for mode ``automatic``, measured on one half of the documents questions.

Reads a ``tribal-memory bench documents --out`` report (every mode asked) and
the question set, and for each candidate rule lists the questions of the
chosen half it fires on and compares the first-gold rank of the mode the
rule would pick with hybrid's (ranks as the report gives them: a summary hit
counts when it covers a gold chunk). Rules were kept or dropped on the
``dev`` half only; run it with ``--half held_out`` only to report.

    python benchmarks/automatic_rules.py benchmarks/results/documents-python311.json
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from tribal_memory.bench.documents_data import load_questions

CANDIDATES: dict[str, tuple[str, re.Pattern[str]]] = {
    "text: a quoted phrase or code identifier": (
        "text",
        re.compile(
            r'"[^"]{2,}"|`[^`]+`|\b\w+\(\)|\b[A-Za-z_]\w*\.[A-Za-z_]\w*|\b[a-z]+_[a-z_]+\b'
            r"|\b[A-Z][a-z]+[A-Z]\w*|--[a-z][\w-]*|@\w+|\bnewline=|\b__\w+__"
        ),
    ),
    "title: names a section or chapter": (
        "title",
        re.compile(r"\b(?:section|sections|chapter|chapters)\b", re.IGNORECASE),
    ),
    "title: in the <doc> HOWTO/tutorial/reference/docs": (
        "title",
        re.compile(
            r"\bin the [\w .-]+ (?:howto|tutorial|reference|docs|documentation)\b", re.IGNORECASE
        ),
    ),
    "summary: overview, summarise, what is X about, walk me through": (
        "summary",
        re.compile(
            r"\b(?:overview|summari[sz]e|summary|gist|main points|walk me through)\b"
            r"|\bwhat\s+is\s+.+\s+about\b",
            re.IGNORECASE,
        ),
    ),
}


def _mrr(rows: list[dict[str, Any]], mode: str) -> float:
    ranks = [row["first_gold_rank"][mode] for row in rows]
    return sum(1 / r for r in ranks if r) / max(1, len(rows))


def main() -> None:
    """Print, per candidate rule, where it fires and how its mode compares with hybrid."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--half", choices=("dev", "held_out"), default="dev")
    args = parser.parse_args()
    report = json.loads(args.report.read_text(encoding="utf-8"))
    texts = {q.question_id: q.text for q in load_questions().questions}
    half = set(report["splits"][args.half]["ids"])
    rows = [row for row in report["questions"] if row["id"] in half]
    print(f"{args.half} half: {len(rows)} questions (seed {report['splits'][args.half]['seed']})")
    for name, (mode, pattern) in CANDIDATES.items():
        fired = [row for row in rows if pattern.search(texts[row["id"]])]
        ranks = [
            (row["first_gold_rank"][mode] or 99, row["first_gold_rank"]["hybrid"] or 99)
            for row in fired
        ]
        better = sum(1 for ours, theirs in ranks if ours < theirs)
        worse = sum(1 for ours, theirs in ranks if ours > theirs)
        print(
            f"{name}: fires on {len(fired)} ({', '.join(r['id'] for r in fired) or '-'}); "
            f"first-gold MRR hybrid {_mrr(fired, 'hybrid'):.3f}, {mode} {_mrr(fired, mode):.3f}; "
            f"{mode} better on {better}, worse on {worse}"
        )


if __name__ == "__main__":
    main()
