"""The learning benchmark: rewording rules, the question split and the report shape."""

from __future__ import annotations

from pathlib import Path

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
