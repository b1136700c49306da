"""Learning benchmark suites: facts, their question phrasings, and distractors.

A suite is a JSON file ``{name, facts, distractors, ...}``. Each fact is one
memory (``id``, ``kind``, ``content``) with two or more ``questions`` that only
it answers, each a ``{style, text}`` pair (``direct``, ``indirect``,
``inference``, ``paraphrase``). Distractors are memories that answer none of
the questions. The protocol: give feedback on one phrasing of a fact's
questions, then measure retrieval of that fact for the other phrasings.

Shipped suites live in ``benchmarks/datasets/`` in a source checkout and in
``tribal_memory/_datasets/`` inside a built wheel.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tribal_memory.base.errors import InvalidInput, NotFound

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
MIN_QUESTIONS = 2


@dataclass(frozen=True, slots=True)
class SuiteQuestion:
    """One phrasing of a question that a single fact answers.

    Attributes:
        text: The question as a user would ask it.
        style: How it relates to the fact's wording (e.g. ``"direct"``, ``"indirect"``).
    """

    text: str
    style: str


@dataclass(frozen=True, slots=True)
class SuiteFact:
    """One memory and the questions only it answers.

    Attributes:
        fact_id: Unique id within the suite (e.g. ``"f001"``).
        kind: The kind of fact (e.g. ``"preference"``, ``"date"``).
        content: The memory text, as an agent would capture it.
        questions: Two or more phrasings answered by this fact alone.
    """

    fact_id: str
    kind: str
    content: str
    questions: tuple[SuiteQuestion, ...]


@dataclass(frozen=True, slots=True)
class Suite:
    """A loaded benchmark suite.

    Attributes:
        name: The suite's name.
        facts: The facts, in file order.
        distractors: Memories that answer none of the questions.
    """

    name: str
    facts: tuple[SuiteFact, ...]
    distractors: tuple[str, ...]


def dataset_dirs() -> tuple[Path, ...]:
    """Where shipped datasets are looked for: the wheel's ``_datasets``, then the checkout's."""
    return (_PACKAGE_DIR / "_datasets", _PACKAGE_DIR.parent / "benchmarks" / "datasets")


def available_suites() -> list[str]:
    """Names of the suites found in the package and source-checkout directories.

    Returns:
        Sorted, de-duplicated suite names (file names without ``.json``).
    """
    names: set[str] = set()
    for directory in dataset_dirs():
        if directory.is_dir():
            names.update(path.stem for path in directory.glob("*.json") if path.is_file())
    return sorted(names)


def suite_path(name: str) -> Path:
    """Resolve a suite name to its JSON file.

    Looks for ``<name>.json`` in ``tribal_memory/_datasets/`` (installed wheel)
    first, then in ``<repo root>/benchmarks/datasets/`` (source checkout).

    Args:
        name: The suite name, e.g. ``"team-facts"``.

    Returns:
        The path of the suite's JSON file.

    Raises:
        NotFound: No suite of that name exists; the message lists the available ones.
    """
    if name and "/" not in name and "\\" not in name and name not in {".", ".."}:
        for directory in dataset_dirs():
            candidate = directory / f"{name}.json"
            if candidate.is_file():
                return candidate
    available = ", ".join(available_suites()) or "none"
    raise NotFound(f"no benchmark suite named {name!r}; available: {available}")


def _field(mapping: dict[str, Any], key: str, where: str) -> object:
    if key not in mapping:
        raise InvalidInput(f"{where}: missing key {key!r}")
    return mapping[key]


def _string(mapping: dict[str, Any], key: str, where: str) -> str:
    value = _field(mapping, key, where)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{where}: {key!r} must be a non-empty string")
    return value


def _list(mapping: dict[str, Any], key: str, where: str) -> list[Any]:
    value = _field(mapping, key, where)
    if not isinstance(value, list):
        raise InvalidInput(f"{where}: {key!r} must be a JSON list")
    return value


def _question(raw: Any, where: str) -> SuiteQuestion:
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where}: each question must be an object with 'style' and 'text'")
    return SuiteQuestion(text=_string(raw, "text", where), style=_string(raw, "style", where))


def _fact(raw: Any, index: int, source: str) -> SuiteFact:
    where = f"{source}: facts[{index}]"
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where} must be an object")
    fact_id = _string(raw, "id", where)
    where = f"{source}: fact {fact_id!r}"
    questions_raw = _list(raw, "questions", where)
    if len(questions_raw) < MIN_QUESTIONS:
        raise InvalidInput(
            f"{where} has {len(questions_raw)} question(s); at least {MIN_QUESTIONS} are needed"
        )
    return SuiteFact(
        fact_id=fact_id,
        kind=_string(raw, "kind", where),
        content=_string(raw, "content", where),
        questions=tuple(
            _question(q, f"{where}, questions[{i}]") for i, q in enumerate(questions_raw)
        ),
    )


def _parse(data: Any, source: str) -> Suite:
    if not isinstance(data, dict):
        raise InvalidInput(f"{source}: a suite must be a JSON object")
    name = _string(data, "name", source)
    facts_raw = _list(data, "facts", source)
    distractors_raw = _list(data, "distractors", source)
    facts = tuple(_fact(raw, i, source) for i, raw in enumerate(facts_raw))
    seen: set[str] = set()
    for fact in facts:
        if fact.fact_id in seen:
            raise InvalidInput(f"{source}: duplicate fact id {fact.fact_id!r}")
        seen.add(fact.fact_id)
    for i, item in enumerate(distractors_raw):
        if not isinstance(item, str) or not item.strip():
            raise InvalidInput(f"{source}: distractors[{i}] must be a non-empty string")
    return Suite(name=name, facts=facts, distractors=tuple(distractors_raw))


def _looks_like_path(value: str) -> bool:
    return value.endswith(".json") or "/" in value or "\\" in value


def load_suite(name_or_path: str | Path) -> Suite:
    """Load and validate a suite by name or from a JSON file.

    Args:
        name_or_path: A suite name (see :func:`suite_path`) or the path of a
            ``.json`` file. A string ending in ``.json`` or containing a path
            separator is taken as a path.

    Returns:
        The parsed suite.

    Raises:
        NotFound: The name matches no suite, or the file does not exist.
        InvalidInput: The file cannot be read or parsed, or is malformed
            (missing keys, wrong types, duplicate fact ids, a fact with fewer
            than two questions).
    """
    if isinstance(name_or_path, Path) or _looks_like_path(name_or_path):
        path = Path(name_or_path)
        if not path.is_file():
            raise NotFound(f"benchmark suite file not found: {path}")
    else:
        path = suite_path(name_or_path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"cannot read benchmark suite {path}: {exc}") from exc
    return _parse(data, str(path))
