"""``bench documents`` on a tiny reST set written here (real model and store; no python3.11-doc)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tribal_memory.base.errors import InvalidInput, NotFound
from tribal_memory.bench.documents import run_documents_bench
from tribal_memory.bench.documents_data import (
    DocQuestion,
    QuestionSet,
    StoredChunk,
    gold_chunks,
    load_questions,
    markdown_path,
)
from tribal_memory.bench.rest_markdown import plain_title, rest_to_markdown
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces import cli

GARDEN = """\
=================
Gardening Guide
=================

Growing things at home.

Tomatoes
========

Tomatoes need full sun and regular watering.

Pruning
-------

Pinch out the side shoots that grow between the stem and a branch.

--------------

Pests
-----

Aphids gather under the leaves; spray them with soapy water.

Roses
=====

Roses like clay soil and a sheltered spot.

Pruning
-------

Cut roses back by a third in late winter, just above an outward-facing bud.
"""

KITCHEN = """\
:mod:`kitchen` --- Cooking at home
==================================

Recipes for busy evenings.

Soups
-----

A lentil soup simmers for forty minutes with cumin and carrots.

::

   # not a heading: a comment in a code block
   soup = simmer(lentils, minutes=40)

Bread
-----

Knead the dough for ten minutes, then let it rise until doubled in size.
"""


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    (docs / "howto").mkdir(parents=True)
    (docs / "howto" / "garden.rst.txt").write_text(GARDEN, encoding="utf-8")
    (docs / "kitchen.rst.txt").write_text(KITCHEN, encoding="utf-8")
    return docs


def _question(qid: str, category: str, heading: str, text: str, *gold: str) -> DocQuestion:
    document = "kitchen.rst.txt" if heading.startswith("kitchen") else "howto/garden.rst.txt"
    return DocQuestion(qid, category, document, heading, text, gold)


QUESTIONS = (
    _question(
        "q1",
        "parent",
        "Gardening Guide > Roses > Pruning",
        "When should I prune roses?",
        "Cut roses back by a third",
    ),
    _question(
        "q2",
        "fact",
        "Gardening Guide > Tomatoes > Pests",
        "How do I get rid of aphids?",
        "spray them with soapy water",
    ),
    _question(
        "q3",
        "section",
        "kitchen --- Cooking at home > Soups",
        "How long does lentil soup simmer?",
        "simmers for forty minutes",
    ),
    _question(
        "q4",
        "fact",
        "kitchen --- Cooking at home > Bread",
        "How long should bread dough be kneaded?",
        "Knead the dough   for ten\nminutes",
    ),
)


def _set(*questions: DocQuestion) -> QuestionSet:
    return QuestionSet(
        "tiny", "written for the tests", ("howto/garden.rst.txt", "kitchen.rst.txt"), questions
    )


def test_titles_become_headings_levelled_by_first_appearance() -> None:
    markdown = rest_to_markdown(GARDEN).splitlines()
    headings = [line for line in markdown if line.startswith("#")]
    assert headings == [
        "# Gardening Guide",
        "## Tomatoes",
        "### Pruning",
        "### Pests",
        "## Roses",
        "### Pruning",
    ]
    assert "--------------" in markdown  # a transition is no title
    assert "Tomatoes need full sun and regular watering." in markdown


def test_overlined_style_differs_from_underlined_with_the_same_character() -> None:
    text = "=====\nTitle\n=====\n\nBody.\n\nPart\n====\n\nMore.\n\nOther\n=====\n"
    headings = [line for line in rest_to_markdown(text).splitlines() if line.startswith("#")]
    assert headings == ["# Title", "## Part", "## Other"]


def test_code_lines_that_look_like_markdown_are_indented_and_roles_unwrapped() -> None:
    markdown = rest_to_markdown(KITCHEN).splitlines()
    assert markdown[0] == "# kitchen --- Cooking at home"
    assert "       # not a heading: a comment in a code block" in markdown
    assert "   soup = simmer(lentils, minutes=40)" in markdown
    assert plain_title(":class:`~a.b.Path` and :ref:`the guide <guide>`") == "Path and the guide"
    assert plain_title(":class:`.datetime` Objects") == "datetime Objects"


def test_markdown_path_replaces_the_rest_suffix() -> None:
    assert markdown_path("howto/logging.rst.txt") == "howto/logging.md"
    assert markdown_path("a.rst") == "a.md"


def _chunks() -> dict[str, list[StoredChunk]]:
    return {
        "howto/garden.rst.txt": [
            StoredChunk(
                "a",
                "### Pruning\n\nCut roses back by a third\nin late winter",
                "G > Roses > Pruning",
            ),
            StoredChunk("b", "### Pruning\n\nPinch out the side shoots", "G > Tomatoes > Pruning"),
        ]
    }


def test_gold_is_every_chunk_of_the_document_holding_a_phrase_spaces_folded() -> None:
    question = DocQuestion(
        "q", "parent", "howto/garden.rst.txt", "G > Roses", "?", ("by a third in  late",)
    )
    assert gold_chunks([question], _chunks()) == {"q": {"a"}}


def test_a_phrase_no_chunk_holds_or_one_outside_the_heading_fails_loudly() -> None:
    missing = DocQuestion("q7", "fact", "howto/garden.rst.txt", "G > Roses", "?", ("no such text",))
    with pytest.raises(InvalidInput, match="q7: no chunk of howto/garden.rst.txt holds"):
        gold_chunks([missing], _chunks())
    wide = DocQuestion("q8", "fact", "howto/garden.rst.txt", "G > Roses", "?", ("### Pruning",))
    with pytest.raises(InvalidInput, match="q8: '### Pruning' is also in 'G > Tomatoes > Pruning'"):
        gold_chunks([wide], _chunks())


def test_report_has_every_mode_category_and_the_expanded_comparison(
    embedder: FastEmbedEmbedder, tmp_path: Path
) -> None:
    out = tmp_path / "report.json"
    report = run_documents_bench(
        _docs(tmp_path), out, question_set=_set(*QUESTIONS), embedder=embedder, log=lambda _: None
    )
    assert json.loads(out.read_text()) == report
    assert (report["n_documents"], report["n_questions"]) == (2, 4)
    assert report["n_chunks"] >= 7
    assert report["questions_per_category"] == {"fact": 2, "parent": 1, "section": 1}
    assert list(report["modes"]) == [
        "hybrid", "vector", "text", "hybrid_expanded", "title", "summary", "automatic"
    ]  # fmt: skip
    assert report["n_summaries"] > 0 and report["ingest_cpu_s"] > 0
    # Summaries take no part in the chunk modes, and summary mode returns only summaries.
    for mode in ("hybrid", "vector", "text", "hybrid_expanded"):
        assert report["modes_chunks_only"][mode] == {
            m: report["modes"][mode][m] for m in report["modes_chunks_only"][mode]
        }
    assert report["modes_chunks_only"]["summary"]["recall@20"] == 0.0
    assert report["modes"]["summary"]["recall@20"] > 0.0  # its summaries cover gold chunks
    halves = report["splits"]
    assert halves["dev"]["ids"] and halves["held_out"]["ids"]
    assert sorted(halves["dev"]["ids"] + halves["held_out"]["ids"]) == ["q1", "q2", "q3", "q4"]
    assert all(q["automatic"].split(":")[0] in report["modes"] for q in report["questions"])
    for figures in report["modes"].values():
        for metric in ("recall@5", "recall@10", "recall@20", "hit@10", "mrr", "ndcg@10"):
            assert 0.0 <= figures[metric] <= 1.0
        assert figures["p50_ms"] > 0
        assert set(figures["per_category"]) == {"fact", "parent", "section"}
        assert figures["per_category"]["fact"]["n"] == 2
    # the store holds a handful of chunks, so every gold chunk is in the top 20
    assert report["modes"]["hybrid"]["recall@20"] == 1.0
    diff = report["comparisons"]["hybrid_expanded - hybrid"]
    expected = report["modes"]["hybrid_expanded"]["mrr"] - report["modes"]["hybrid"]["mrr"]
    assert diff["mrr"] == pytest.approx(expected, abs=1e-4)
    assert diff["recall@10_up"] + diff["recall@10_down"] <= 4
    assert [q["id"] for q in report["questions"]] == ["q1", "q2", "q3", "q4"]
    assert set(report["questions"][0]["first_gold_rank"]) == set(report["modes"])


def test_a_question_whose_gold_matches_no_chunk_stops_the_run(
    embedder: FastEmbedEmbedder, tmp_path: Path
) -> None:
    broken = _question(
        "q9", "fact", "kitchen --- Cooking at home > Bread", "?", "sourdough starter"
    )
    with pytest.raises(
        InvalidInput, match="q9: no chunk of kitchen.rst.txt holds 'sourdough starter'"
    ):
        run_documents_bench(
            _docs(tmp_path),
            None,
            modes=("hybrid",),
            question_set=_set(QUESTIONS[0], broken),
            embedder=embedder,
            log=lambda _: None,
        )


def test_missing_documents_name_the_package(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="apt-get install python3.11-doc"):
        run_documents_bench(tmp_path, None, question_set=_set(*QUESTIONS))


def test_the_shipped_question_set_loads() -> None:
    questions = load_questions()
    assert 60 <= len(questions.questions) <= 100
    assert {q.category for q in questions.questions} == {"section", "parent", "span", "fact"}
    assert all(d.endswith(".rst.txt") for d in questions.documents)


def test_cli_rejects_an_unknown_mode() -> None:
    result = CliRunner().invoke(cli.app, ["bench", "documents", "--modes", "hybrid,nope"])
    assert result.exit_code == 1
    assert "--modes takes some of" in result.output


@pytest.mark.parametrize("bench", ["documents", "locomo", "learn", "perf"])
def test_benchmarks_take_no_data_dir(bench: str, tmp_path: Path) -> None:
    # Each benchmark builds its own stores: a --data-dir would be silently ignored.
    result = CliRunner().invoke(cli.app, ["bench", bench, "--data-dir", str(tmp_path)])
    assert result.exit_code == 2 and "--data-dir" in result.output
    assert not any(tmp_path.iterdir())
