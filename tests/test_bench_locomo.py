"""``bench locomo`` on a small LoCoMo-format conversation written here (real model and stores)."""

from __future__ import annotations

import json
from pathlib import Path

from tribal_memory.bench.locomo import run_locomo_bench
from tribal_memory.documents.locomo import load_locomo
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder

TURNS = [
    ("Ana", "I finally adopted a dog last weekend!"),
    ("Ben", "Congrats! What breed is it?"),
    ("Ana", "A border collie named Pepper, she is two years old."),
    ("Ben", "I started learning the violin in March."),
    ("Ana", "How are the lessons going?"),
    ("Ben", "Slowly, my teacher says my bowing needs work."),
]


def _conversation(path: Path) -> Path:
    session = [
        {"speaker": speaker, "dia_id": f"D1:{i + 1}", "text": text}
        for i, (speaker, text) in enumerate(TURNS)
    ]
    sample = {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": session,
        },
        "qa": [
            {
                "question": "What breed is Ana's dog?",
                "answer": "border collie",
                "evidence": ["D1:3"],
                "category": 4,
            },
            {
                "question": "Which instrument is Ben learning?",
                "answer": "violin",
                "evidence": ["D1:4"],
                "category": 4,
            },
            {"question": "Is this unanswerable?", "evidence": [], "category": 5},
        ],
    }
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path


def test_turns_of_a_session_are_adjacent_memories(tmp_path: Path) -> None:
    [sample] = load_locomo(_conversation(tmp_path / "c.json"))
    assert {m.doc_id for m in sample.memories} == {"conv-test/session_1"}
    assert [m.chunk_index for m in sample.memories] == list(range(len(TURNS)))


def test_report_holds_the_server_and_the_yardsticks(
    tmp_path: Path, embedder: FastEmbedEmbedder
) -> None:
    out = tmp_path / "report.json"
    report = run_locomo_bench(
        _conversation(tmp_path / "c.json"), out, embedder=embedder, progress=False
    )
    assert json.loads(out.read_text()) == report
    assert report["n_questions"] == 2  # category 5 is not scored
    assert set(report["variants"]) == {"vector", "hybrid", "hybrid_expanded", "bm25", "lin"}
    for name, figures in report["variants"].items():
        for metric in ("recall@5", "recall@10", "recall@25", "mrr", "p50_ms"):
            assert figures[metric] >= 0.0, (name, metric)
        assert figures["per_category"]["4"]["n"] == 2
    # Each yardstick finds the one evidence turn of these word-for-word questions.
    assert report["variants"]["bm25"]["recall@5"] == 1.0
    assert report["variants"]["hybrid"]["recall@5"] == 1.0
    assert report["settings"]["neighbour_weight"] == 0.5
