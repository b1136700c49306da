"""The learning benchmark: rewording rules, the question split and the report shape."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from tribal_memory.base.models import MemoryInput
from tribal_memory.bench.learn import SETS, run_learn_bench
from tribal_memory.bench.learn_data import BenchQuestion, BenchStore, reword, suite_stores
from tribal_memory.embeddings.base import Embedder


def test_reword_rules_drop_the_question_word_move_a_clause_or_wrap() -> None:
    assert reword("When did Ana move to Lisbon?", 0) == "Ana move to Lisbon"
    assert reword("What did Ana buy in Lisbon?", 1) == "In Lisbon, what did Ana buy?"
    assert reword("Where is the VPN host?", 2) == "Do you remember where is the VPN host?"


def test_suite_split_feeds_one_phrasing_of_half_the_facts() -> None:
    (store,) = suite_stores("team-facts", seed=0)
    fed_facts = {q.gold for q in store.fed}
    assert len(store.fed) == len(fed_facts)
    fed_texts = {q.text for q in store.fed}
    assert not fed_texts & {q.text for q in store.new}
    assert any(q.gold in fed_facts for q in store.new)
    assert any(q.gold not in fed_facts for q in store.new)


TINY_FACTS = {
    "f1": "Priya is allergic to peanuts",
    "f2": "Project Atlas ships on March 3",
    "f3": "Tom prefers tea over coffee",
    "f4": "The staging database runs on db-stage-2",
}


def _tiny_memories() -> list[MemoryInput]:
    return [MemoryInput(c, owner="t", metadata={"key": k}) for k, c in TINY_FACTS.items()]


def test_report_has_every_variant_and_set_and_feedback_makes_repeats_cached(
    embedder: Embedder, tmp_path: Path
) -> None:
    memories = _tiny_memories()
    store = BenchStore(
        "t",
        memories,
        fed=[BenchQuestion("What is Priya allergic to?", ("f1",))],
        new=[BenchQuestion("Which host runs staging?", ("f4",))],
    )
    report = run_learn_bench(
        [store],
        dataset="tiny",
        protocol="feedback-half",
        seed=0,
        out=tmp_path / "report.json",
        variants=("plain", "learned"),
        embedder=embedder,
    )
    assert (tmp_path / "report.json").exists()
    assert (report["feedback"], report["feedback_k"]) == ("agent", 10)  # what it was shown
    after = report["after_feedback"]
    assert after["search_p50_ms"] == report["variants"]["plain"]["new"]["p50_ms"] > 0
    assert after["learned_p50_ms"] == report["variants"]["learned"]["new"]["p50_ms"] > 0
    assert report["feedback_coverage"] == 1.0
    for variant in ("plain", "learned"):
        assert set(report["variants"][variant]) == set(SETS)
        for metrics in report["variants"][variant].values():
            assert {"n", "recall@5", "recall@10", "recall@25", "mrr", "p50_ms"} <= set(metrics)
            assert {"cache_hit_rate", "false_hit_rate"} <= set(metrics)
    assert report["variants"]["learned"]["repeat"]["cache_hit_rate"] == 1.0
    assert report["variants"]["plain"]["repeat"]["cache_hit_rate"] == 0.0
    assert report["variants"]["learned"]["repeat"]["recall@10"] == 1.0
    # The memory reported used for the fed question comes back for its repeat.
    assert report["variants"]["learned"]["repeat"]["used_in_top10"] == 1.0
    assert report["variants"]["learned"]["new"]["used_in_top10"] is None
    names = {t["name"] for t in report["targets"]}
    assert "repeat: used memories in the top 10 >= 0.99" in names


def test_feedback_over_what_an_agent_is_shown_is_labelled_oracle() -> None:
    from tribal_memory.bench.learn import feedback_label

    assert [feedback_label(k) for k in (6, 10, 11, 200)] == ["agent", "agent", "oracle", "oracle"]


def test_session_feedback_reports_what_a_second_search_found(embedder: Embedder) -> None:
    memories = _tiny_memories()
    # Shown only the top hit (Tom's), the agent misses f4; the answer text finds it.
    question = BenchQuestion(
        "What does Tom prefer to drink?", ("f4",), "the staging database db-stage-2"
    )
    coverage = {}
    for session in (False, True):
        store = BenchStore("t", memories, fed=[question], new=[question])
        report = run_learn_bench(
            [store],
            dataset="tiny",
            protocol="feedback-half",
            seed=0,
            rounds=1,
            feedback_k=1,
            session=session,
            variants=("plain",),
            embedder=embedder,
        )
        coverage[session] = report["feedback_coverage"]
        assert report["feedback"] == ("agent + session" if session else "agent")
    assert (coverage[False], coverage[True]) == (0.0, 1.0)


def _store(fed: list[BenchQuestion]) -> BenchStore:
    return BenchStore(
        "t", _tiny_memories(), fed=fed, new=[BenchQuestion("Which host runs staging?", ("f4",))]
    )


FED = [
    BenchQuestion("What is Priya allergic to?", ("f1",)),
    BenchQuestion("When does Project Atlas ship?", ("f2",)),
]


def test_fed_limit_replays_only_the_first_questions(embedder: Embedder) -> None:
    report = run_learn_bench(
        [_store(FED)],
        dataset="tiny",
        protocol="feedback-half",
        seed=0,
        rounds=1,
        fed_limit=1,
        variants=("plain",),
        embedder=embedder,
    )
    assert report["fed_limit"] == 1
    assert report["variants"]["plain"]["repeat"]["n"] == 1


def test_noisy_feedback_misses_gold_and_reports_other_hits(embedder: Embedder) -> None:
    questions = [BenchQuestion(f"{q.text} ({n})", q.gold) for n in range(20) for q in FED]
    coverage = {}
    for noisy in (False, True):
        report = run_learn_bench(
            [_store(questions)],
            dataset="tiny",
            protocol="feedback-half",
            seed=0,
            rounds=1,
            noisy=noisy,
            variants=("plain",),
            embedder=embedder,
        )
        coverage[noisy] = report["feedback_coverage"]
        assert report["feedback"] == ("agent + noisy" if noisy else "agent")
    # A fifth of 40 reported golds missed, give or take what 40 draws give.
    assert coverage[False] == 1.0 and 0.6 < coverage[True] < 0.95


def test_seeds_are_combined_as_means_spreads_and_lifts() -> None:
    from tribal_memory.bench.learn_seeds import combine

    def report(seed: int, plain: float, learned: float) -> dict[str, Any]:
        def sets(value: float) -> dict[str, Any]:
            metrics = {"n": 10, "recall@10": value, "hit@5": value, "mrr": value, "p50_ms": 5.0}
            metrics.update(used_in_top10=1.0, false_hit_rate=0.0)
            return {s: dict(metrics) for s in SETS}

        return {
            "seed": seed,
            "protocol": "feedback-half",
            "feedback": "agent",
            "feedback_coverage": 0.5,
            "after_feedback": {"search_p50_ms": 5.0, "learned_p50_ms": None},
            "variants": {"plain": sets(plain), "learned": sets(learned)},
        }

    combined = combine([report(0, 0.70, 0.74), report(1, 0.72, 0.73)])
    assert combined["seeds"] == [0, 1]
    new = combined["variants"]["learned"]["new"]
    assert new["recall@10"] == 0.735 and new["n"] == 20
    assert new["recall@10_sd"] == round(statistics.stdev([0.74, 0.73]), 4)
    lifts = [s["recall@10_lift"]["learned"]["new"] for s in combined["per_seed"]]
    assert lifts == [0.04, 0.01]
    assert combined["after_feedback"] == {"search_p50_ms": 5.0, "learned_p50_ms": None}
    assert {t["name"] for t in combined["targets"]} >= {"new: learned recall@10 >= plain + 0.03"}
