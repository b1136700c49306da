"""The documents benchmark's data: the question set, its documents, and gold chunks.

A question set is a JSON file::

    {"name": "python-docs-questions",
     "source": "...", "licence": "...",          # where the documents come from
     "documents": ["howto/logging.rst.txt", ...], # reST files, relative to the docs dir
     "questions": [{"id": "q001", "category": "section",
                    "document": "howto/logging.rst.txt",
                    "heading": "Logging HOWTO > Basic Logging Tutorial > When to use logging",
                    "question": "...", "gold": ["a phrase copied from the text", ...]}]}

A question's gold chunks are the chunks of its document whose text holds one
of its gold phrases, whitespace runs compared as one space (reST wraps
lines). :func:`gold_chunks` fails on a phrase that no chunk holds and on a
gold chunk outside the question's ``heading`` (the path of the section that
answers it, as chunk metadata spells it): a phrase that is not distinctive
must be made so, never silently scored.

The shipped set lives in ``benchmarks/datasets/`` in a source checkout and in
``tribal_memory/_datasets/`` inside a built wheel.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tribal_memory.base.errors import InvalidInput, NotFound
from tribal_memory.bench.suite import dataset_dirs

QUESTIONS_FILE = "python-docs-questions.json"
DEFAULT_DOCS_DIR = Path("/usr/share/doc/python3.11/html/_sources")
"""Where Debian's ``python3.11-doc`` puts the reST sources of the documentation."""

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class DocQuestion:
    """One question about one document.

    Attributes:
        question_id: Unique within the set (e.g. ``"q001"``).
        category: What answering takes (``section``, ``parent``, ``span``, ``fact``).
        document: The reST file, relative to the docs dir.
        heading: Path of the section that answers it (``"A > B > C"``).
        text: The question as a user would ask it.
        gold: Phrases copied from the section; chunks holding one are gold.
    """

    question_id: str
    category: str
    document: str
    heading: str
    text: str
    gold: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class QuestionSet:
    """A loaded question set (see the module docstring)."""

    name: str
    source: str
    documents: tuple[str, ...]
    questions: tuple[DocQuestion, ...]


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A chunk as the store holds it: id, text and heading path."""

    memory_id: str
    content: str
    heading: str


def questions_path() -> Path:
    """The shipped question set: the wheel's ``_datasets`` first, then the checkout's.

    Raises:
        NotFound: neither directory holds it.
    """
    for directory in dataset_dirs():
        if (directory / QUESTIONS_FILE).is_file():
            return directory / QUESTIONS_FILE
    raise NotFound(f"{QUESTIONS_FILE} is not installed with this package")


def markdown_path(document: str) -> str:
    """The path a reST document is ingested under: ``.rst.txt``/``.rst`` -> ``.md``."""
    for suffix in (".rst.txt", ".rst", ".txt"):
        if document.endswith(suffix):
            return document[: -len(suffix)] + ".md"
    return document + ".md"


def _string(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{where}: {key!r} must be a non-empty string")
    return value


def _question(raw: Any, index: int, documents: set[str], source: str) -> DocQuestion:
    where = f"{source}: questions[{index}]"
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where} must be an object")
    gold = raw.get("gold")
    if not isinstance(gold, list) or not gold or not all(isinstance(g, str) and g for g in gold):
        raise InvalidInput(f"{where}: 'gold' must be a non-empty list of phrases")
    document = _string(raw, "document", where)
    if document not in documents:
        raise InvalidInput(f"{where}: document {document!r} is not in 'documents'")
    return DocQuestion(
        question_id=_string(raw, "id", where),
        category=_string(raw, "category", where),
        document=document,
        heading=_string(raw, "heading", where),
        text=_string(raw, "question", where),
        gold=tuple(gold),
    )


def load_questions(path: Path | None = None) -> QuestionSet:
    """Load and check a question set (default: the shipped one).

    Raises:
        NotFound: the file does not exist.
        InvalidInput: it cannot be read or is malformed (missing keys, a
            question about a document not listed, duplicate ids).
    """
    path = path or questions_path()
    if not path.is_file():
        raise NotFound(f"question set not found: {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"cannot read question set {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("documents"), list):
        raise InvalidInput(f"{path}: a question set is an object with 'documents' and 'questions'")
    documents = tuple(str(d) for d in data["documents"])
    raw_questions = data.get("questions")
    if not isinstance(raw_questions, list) or not raw_questions:
        raise InvalidInput(f"{path}: 'questions' must be a non-empty list")
    questions = tuple(
        _question(raw, i, set(documents), str(path)) for i, raw in enumerate(raw_questions)
    )
    ids = [q.question_id for q in questions]
    if len(set(ids)) != len(ids):
        raise InvalidInput(f"{path}: duplicate question ids")
    return QuestionSet(
        name=_string(data, "name", str(path)),
        source=str(data.get("source", "")),
        documents=documents,
        questions=questions,
    )


def _flat(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _within(heading: str, section: str) -> bool:
    return heading == section or heading.startswith(section + " > ")


def gold_chunks(
    questions: Sequence[DocQuestion], chunks: Mapping[str, Sequence[StoredChunk]]
) -> dict[str, set[str]]:
    """Each question's gold chunk ids (see the module docstring).

    Args:
        questions: The questions.
        chunks: The stored chunks of each document, keyed by the question's
            ``document``.

    Returns:
        ``{question id: {memory id, ...}}``, every set non-empty.

    Raises:
        InvalidInput: naming every question with a phrase no chunk of its
            document holds, or with a gold chunk outside its ``heading``.
    """
    gold: dict[str, set[str]] = {}
    problems: list[str] = []
    for question in questions:
        found: set[str] = set()
        for phrase in question.gold:
            holding = [
                c for c in chunks.get(question.document, ()) if _flat(phrase) in _flat(c.content)
            ]
            if not holding:
                problems.append(
                    f"{question.question_id}: no chunk of {question.document} holds {phrase!r}"
                )
            for chunk in holding:
                if not _within(chunk.heading, question.heading):
                    problems.append(
                        f"{question.question_id}: {phrase!r} is also in {chunk.heading!r}, "
                        f"outside {question.heading!r}"
                    )
                found.add(chunk.memory_id)
        gold[question.question_id] = found
    if problems:
        raise InvalidInput("gold phrases that do not pick out chunks:\n" + "\n".join(problems))
    return gold
