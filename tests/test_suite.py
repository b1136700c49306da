"""The shipped learning benchmark suite and its loader."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tribal_memory.base.errors import InvalidInput, NotFound
from tribal_memory.bench.suite import Suite, available_suites, load_suite, suite_path

STYLES = {"direct", "indirect", "inference", "paraphrase"}
REQUIRED_STYLES = {"direct", "indirect", "inference"}
MAIN_KINDS = ("preference", "person", "project", "decision", "date")


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite("team-facts")


def test_shipped_suite_resolves_and_loads(suite: Suite) -> None:
    assert "team-facts" in available_suites()
    assert suite_path("team-facts").name == "team-facts.json"
    assert suite.name == "team-facts"
    assert load_suite(suite_path("team-facts")) == suite


def test_shipped_suite_size(suite: Suite) -> None:
    assert len(suite.facts) >= 150
    assert len(suite.distractors) >= 400
    kinds = Counter(fact.kind for fact in suite.facts)
    for kind in MAIN_KINDS:
        assert kinds[kind] >= 20, (kind, kinds[kind])


def test_every_fact_has_three_or_four_styled_questions(suite: Suite) -> None:
    for fact in suite.facts:
        styles = [q.style for q in fact.questions]
        assert 3 <= len(styles) <= 4, fact.fact_id
        assert len(set(styles)) == len(styles), fact.fact_id
        assert set(styles) <= STYLES, fact.fact_id
        assert set(styles) >= REQUIRED_STYLES, fact.fact_id
        assert all(q.text.strip() for q in fact.questions), fact.fact_id


def test_ids_and_contents_are_unique(suite: Suite) -> None:
    ids = [fact.fact_id for fact in suite.facts]
    assert len(ids) == len(set(ids))
    contents = [fact.content for fact in suite.facts] + list(suite.distractors)
    normalised = [text.strip().casefold() for text in contents]
    assert len(normalised) == len(set(normalised))
    questions = [q.text.strip().casefold() for fact in suite.facts for q in fact.questions]
    assert len(questions) == len(set(questions))


def test_no_distractor_equals_a_fact(suite: Suite) -> None:
    facts = {fact.content.strip().casefold() for fact in suite.facts}
    assert not facts & {d.strip().casefold() for d in suite.distractors}


def test_memory_lengths_stay_in_range(suite: Suite) -> None:
    for text in [fact.content for fact in suite.facts] + list(suite.distractors):
        assert 5 <= len(text.split()) <= 40, text


def test_unknown_suite_is_not_found() -> None:
    with pytest.raises(NotFound, match="team-facts"):
        load_suite("no-such-suite")
    with pytest.raises(NotFound):
        suite_path("../team-facts")


def test_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        load_suite(tmp_path / "absent.json")


def _minimal() -> dict[str, Any]:
    question = [{"style": "direct", "text": "Q1?"}, {"style": "indirect", "text": "Q2?"}]
    return {
        "name": "tiny",
        "facts": [
            {"id": "a", "kind": "preference", "content": "A likes tea.", "questions": question},
            {"id": "b", "kind": "date", "content": "B was born in May.", "questions": question},
        ],
        "distractors": ["C likes trains."],
    }


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_minimal_suite_loads_from_path(tmp_path: Path) -> None:
    loaded = load_suite(str(_write(tmp_path, _minimal())))
    assert loaded.name == "tiny"
    assert [f.fact_id for f in loaded.facts] == ["a", "b"]
    assert loaded.facts[0].questions[1].style == "indirect"
    assert loaded.distractors == ("C likes trains.",)


def _without_distractors(data: dict[str, Any]) -> None:
    del data["distractors"]


def _without_content(data: dict[str, Any]) -> None:
    del data["facts"][0]["content"]


def _duplicate_id(data: dict[str, Any]) -> None:
    data["facts"][1]["id"] = "a"


def _one_question(data: dict[str, Any]) -> None:
    data["facts"][0]["questions"] = data["facts"][0]["questions"][:1]


def _question_without_text(data: dict[str, Any]) -> None:
    data["facts"][1]["questions"] = [{"style": "direct"}, {"style": "indirect", "text": "Q?"}]


def _non_string_distractor(data: dict[str, Any]) -> None:
    data["distractors"].append(42)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_without_distractors, "missing key 'distractors'"),
        (_without_content, "missing key 'content'"),
        (_duplicate_id, "duplicate fact id 'a'"),
        (_one_question, "at least 2"),
        (_question_without_text, "missing key 'text'"),
        (_non_string_distractor, r"distractors\[1\]"),
    ],
)
def test_malformed_suite_is_invalid_input(tmp_path: Path, mutate: Any, message: str) -> None:
    data = _minimal()
    mutate(data)
    with pytest.raises(InvalidInput, match=message):
        load_suite(_write(tmp_path, data))


def test_non_json_and_non_object_are_invalid_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(InvalidInput, match="cannot read"):
        load_suite(bad)
    with pytest.raises(InvalidInput, match="JSON object"):
        load_suite(_write(tmp_path, [1, 2, 3]))
