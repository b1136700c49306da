"""Calibrated scores: a hit's ``score`` means the same across queries, and abstention works.

Real model and stores. The relevance model itself is measured by
``tribal-memory bench calibration``; these tests pin what a caller relies on.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tribal_memory.base.models import MemoryInput, SearchFilters
from tribal_memory.base.results import SearchMode
from tribal_memory.bench.calibration import auroc, chosen_min_score, run_calibration_bench
from tribal_memory.interfaces.context import build_context
from tribal_memory.interfaces.tool_args import MemorySearchIn
from tribal_memory.interfaces.tools import memory_search
from tribal_memory.retrieval.calibration import (
    DEFAULT_MIN_SCORE,
    FEATURES,
    coverage,
    fit,
    query_stems,
)
from tribal_memory.service.memory_service import MemoryService

FACTS = [
    "Priya's favourite food is ramen from the shop on Elm Street.",
    "The production deploy runs every Friday at 5pm with Ansible.",
    "Our staging database is PostgreSQL 16 on the db-2 host.",
    "Bob moved to Lisbon in March and works remotely now.",
    "The office wifi password rotates on the first Monday of each month.",
]
OFF_TOPIC = [
    "purple elephant saxophone quartet",
    "Write a sonnet about the migration of arctic terns",
    "What is the boiling point of tungsten in kelvin?",
]


@pytest.fixture
def facts(service: MemoryService) -> MemoryService:
    service.capture_batch([MemoryInput(text, owner="alice") for text in FACTS])
    return service


def _top(service: MemoryService, query: str, mode: SearchMode = "hybrid") -> float:
    result = service.search(query, k=5, filters=SearchFilters(owner="alice"), mode=mode)
    return result.hits[0].score if result.hits else 0.0


@pytest.mark.parametrize("mode", ["hybrid", "vector", "text"])
def test_an_answerable_question_keeps_its_hit_and_off_topic_ones_fall_under_the_default(
    facts: MemoryService, mode: SearchMode
) -> None:
    result = facts.search(
        "Which database runs on staging?",
        k=5,
        filters=SearchFilters(owner="alice"),
        mode=mode,
    )
    assert result.hits[0].memory.content == FACTS[2]
    assert result.hits[0].score >= DEFAULT_MIN_SCORE
    if mode != "text":  # BM25 finds nothing for most of these, which is abstention too
        for query in OFF_TOPIC:
            assert _top(facts, query, mode) < DEFAULT_MIN_SCORE, query


def test_the_top_hit_of_a_nonsense_query_is_no_longer_a_perfect_match(
    facts: MemoryService,
) -> None:
    hits = facts.search("purple elephant saxophone quartet", k=5).hits
    # min-max: the best vector candidate of any query gets 1 ...
    assert max(h.vector_score or 0.0 for h in hits) == 1.0
    # ... while its calibrated score says it is no answer.
    assert all(h.score < 0.05 for h in hits)


def test_a_score_does_not_depend_on_what_else_is_stored(service: MemoryService) -> None:
    service.capture(MemoryInput(FACTS[0], owner="alice"))
    alone = service.search("What food does Priya like?", k=1).hits[0]
    service.capture_batch([MemoryInput(text, owner="alice") for text in FACTS[1:]])
    among = service.search("What food does Priya like?", k=1).hits[0]
    assert alone.memory.memory_id == among.memory.memory_id
    assert among.score == pytest.approx(alone.score, abs=1e-6)


def test_min_score_drops_by_calibrated_score_and_renumbers_ranks(facts: MemoryService) -> None:
    query = "When does the production deploy run?"
    every = facts.search(query, k=5, filters=SearchFilters(owner="alice"))
    threshold = sorted(h.score for h in every.hits)[-2]
    kept = facts.search(query, k=5, filters=SearchFilters(owner="alice"), min_score=threshold)
    assert [h.memory.memory_id for h in kept.hits] == [
        h.memory.memory_id for h in every.hits if h.score >= threshold
    ]
    assert [h.rank for h in kept.hits] == list(range(1, len(kept.hits) + 1))
    assert every.cosine_range is not None and every.cosine_range[0] <= every.cosine_range[1]


def test_the_context_block_stays_empty_for_off_topic_prompts(facts: MemoryService) -> None:
    for prompt in OFF_TOPIC:
        assert build_context(facts, prompt, owner="alice").context == "", prompt
    answered = build_context(facts, "What food does Priya like best?", owner="alice")
    assert "ramen" in answered.context


def test_coverage_counts_the_question_stems_found_in_the_memory() -> None:
    stems = query_stems("Which databases run on staging?")
    assert coverage(stems, "Our staging database is PostgreSQL 16") == pytest.approx(2 / 3)
    assert coverage(stems, "Lunch is at noon") == 0.0
    assert coverage(frozenset(), "anything") == 0.0


def test_fit_recovers_the_weights_that_made_the_labels() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20000, len(FEATURES)))
    true = np.array([1.5, -2.0, 0.5, 3.0])
    y = (rng.random(20000) < 1 / (1 + np.exp(-(-1.0 + x @ true)))).astype(float)
    model = fit(x, y)
    assert model.intercept == pytest.approx(-1.0, abs=0.1)
    assert np.allclose(model.weights, true, atol=0.15)
    with pytest.raises(ValueError, match="both classes"):
        fit(x[:3], np.zeros(3))


def test_auroc_counts_pairs_and_ties() -> None:
    assert auroc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert auroc([0.1], [0.9]) == 0.0
    assert auroc([0.5], [0.5]) == 0.5
    assert auroc([0.9, 0.4], [0.5]) == 0.5
    assert auroc([], [0.1]) == 0.5


def test_the_default_min_score_is_the_best_youden_index_of_the_fit_half() -> None:
    rows = {
        "0.02": (1.0, 0.5),
        "0.05": (0.98, 0.10),
        "0.08": (0.95, 0.04),
        "0.1": (0.91, 0.013),
        "0.12": (0.89, 0.01),
        "0.15": (0.83, 0.008),
        "0.2": (0.72, 0.005),
        "0.3": (0.5, 0.0),
    }
    report = {
        "by_min_score": {
            t: {"answerable_keep": a, "off_topic_inject": o} for t, (a, o) in rows.items()
        }
    }
    assert chosen_min_score(report) == 0.08


def _conversation(sample_id: str, speakers: tuple[str, str], turns: list[str]) -> dict:
    a, b = speakers
    session = [
        {"speaker": (a, b)[i % 2], "dia_id": f"D1:{i + 1}", "text": text}
        for i, text in enumerate(turns)
    ]
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": a,
            "speaker_b": b,
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": session,
        },
        "qa": [
            {
                "question": f"What did {a} adopt?",
                "answer": "a dog",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": f"Which instrument is {b} learning?",
                "answer": "violin",
                "evidence": ["D1:2"],
                "category": 4,
            },
        ],
    }


def test_bench_calibration_reports_both_halves(tmp_path: Path) -> None:
    data = [
        _conversation(
            "conv-a",
            ("Ana", "Ben"),
            [
                "I adopted a border collie puppy!",
                "I started learning the violin in March.",
                "The weather was rainy all week.",
                "We should meet for coffee soon.",
            ],
        ),
        _conversation(
            "conv-b",
            ("Chloe", "Dev"),
            [
                "I adopted a grey cat from the shelter.",
                "I am learning the cello at night school.",
                "My new job starts on Monday.",
                "The train was late again today.",
            ],
        ),
    ]
    path = tmp_path / "two.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "report.json"
    report = run_calibration_bench(path, out, refit=False, progress=False)
    assert json.loads(out.read_text()) == report
    assert report["fit_conversations"] == [1]
    assert report["held_out_conversations"] == [2]
    assert "conv-a" not in out.read_text()  # positions, not the data's conversation ids
    held = report["held_out"]
    assert held["n"] == {"answerable": 2, "off-topic": 2, "nonsense": 20}
    assert 0.0 <= held["auroc"] <= 1.0
    assert set(held["by_min_score"]["0.1"]) >= {"answerable_keep", "off_topic_inject"}


def test_a_memory_an_anchor_finds_stays_above_the_default_min_score(
    facts: MemoryService,
) -> None:
    wifi = next(
        h.memory
        for h in facts.search("wifi password", k=1, filters=SearchFilters(owner="alice")).hits
    )
    question = "How do guests get online in the office?"
    plain = build_context(facts, question, owner="alice")
    assert "wifi" not in plain.context  # the words alone do not reach it
    facts.add_anchor(wifi.memory_id, question)
    anchored = build_context(facts, question, owner="alice")
    assert "wifi" in anchored.context
    hit = facts.search(question, k=3, filters=SearchFilters(owner="alice")).hits[0]
    assert hit.memory.memory_id == wifi.memory_id and hit.anchor_match == 1.0
    assert hit.score >= 0.6  # the anchor's gain counts as evidence (noisy-OR)


def test_the_agents_search_keeps_a_loosely_worded_answer_by_default(
    service: MemoryService,
) -> None:
    service.capture_batch(
        [
            MemoryInput(
                "User: I moved to Lisbon in the spring of 2025 for the new job.", owner="main"
            ),
            MemoryInput("User: My cat is called Miso and sleeps on the bookshelf.", owner="main"),
        ]
    )
    question = "Which city did I move to, from earlier conversations?"
    answer = memory_search(service, MemorySearchIn(query=question), owner="main")
    assert any("Lisbon" in r["snippet"] for r in answer["results"])
