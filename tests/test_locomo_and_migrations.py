"""LoCoMo-format parsing, benchmark metrics and the Alembic migrations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import inspect
from sqlalchemy.orm import Session

from tribal_memory.base.db import current_revision, head_revision, make_engine, migrate
from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.tables import Base
from tribal_memory.bench.metrics import hit_at, ndcg_at, percentile, recall_at, reciprocal_rank
from tribal_memory.documents.locomo import load_locomo, normalise_evidence, parse_session_date

TINY = [
    {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat named Miso."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Look!", "blip_caption": "a red kite"},
            ],
            "session_2_date_time": "10:00 am on 9 June, 2023",
            "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "Miso likes boxes."}],
        },
        "qa": [
            {
                "question": "What is Ana's cat called?",
                "answer": "Miso",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {"question": "x?", "answer": "y", "evidence": ["D1:1; D2:1"], "category": 1},
            {"question": "adv?", "adversarial_answer": "z", "evidence": [], "category": 5},
        ],
    }
]


def test_locomo_turns_become_dated_memories(tmp_path: Path) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    (sample,) = load_locomo(path)
    assert sample.sample_id == "tiny-1"
    assert [m.metadata["dia_id"] for m in sample.memories] == ["D1:1", "D1:2", "D2:1"]
    first = sample.memories[0]
    assert first.owner == "tiny-1"
    assert first.content == "[1:56 pm on 8 May, 2023] Ana: I adopted a cat named Miso."
    assert first.event_time is not None and first.event_time.month == 5
    assert "a red kite" in sample.memories[1].content
    assert sample.questions[1].evidence == ("D1:1", "D2:1")
    assert sample.questions[2].category == 5


def test_locomo_rejects_other_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"not": "a list"}))
    with pytest.raises(InvalidInput):
        load_locomo(path)
    with pytest.raises(InvalidInput):
        load_locomo(tmp_path / "missing.json")


def test_evidence_and_dates_normalise() -> None:
    assert normalise_evidence(["D8:6; D9:17", "D8:6"]) == ("D8:6", "D9:17")
    assert parse_session_date("not a date") is None


def test_metrics() -> None:
    ranked = ["a", "b", "c", "d"]
    assert recall_at(ranked, {"b", "z"}, 2) == 0.5
    assert hit_at(ranked, {"d"}, 3) == 0.0
    assert reciprocal_rank(ranked, {"c"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(ranked, {"z"}) == 0.0
    assert ndcg_at(["a"], {"a"}, 10) == 1.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5


def test_migrations_create_every_table_and_are_idempotent(tmp_path: Path) -> None:
    engine = make_engine(tmp_path / "t.sqlite3")
    assert current_revision(engine) is None
    assert migrate(engine) == head_revision()
    assert migrate(engine) == head_revision()
    # Every table the code maps exists after the migrations.
    assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    engine.dispose()


def test_migrations_match_the_table_definitions(tmp_path: Path) -> None:
    """The migrated schema equals what base.tables declares (nothing missing or extra)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from tribal_memory.base.tables import Base

    engine = make_engine(tmp_path / "t.sqlite3")
    migrate(engine)
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    engine.dispose()
    assert diff == []


@pytest.mark.sqlite_only(reason="drives alembic revisions on its own SQLite file")
def test_migration_0006_gives_anchors_the_owners_whose_feedback_made_them(
    tmp_path: Path,
) -> None:
    from alembic import command
    from sqlalchemy import text

    from tribal_memory.base.db import _alembic_config
    from tribal_memory.base.sql import read_generation

    engine = make_engine(tmp_path / "t.sqlite3")

    def to(revision: str, *, down: bool = False) -> None:
        config = _alembic_config(engine)
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            (command.downgrade if down else command.upgrade)(config, revision)

    to("0005")
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO fact_anchors (memory_id, anchor_text, source, confidence, "
                "created_at, uses) VALUES "
                "('m1', 'where is the vpn', 'learned', 1, '2026-01-01 00:00:00', 3), "
                "('m1', 'who knows', 'learned', 1, '2026-01-01 00:00:00', 2), "
                "('m2', 'the launch date', 'manual', 1, '2026-01-01 00:00:00', 0)"
            )
        )
        for number, owner in enumerate(("alice", "alice", "bob")):
            connection.execute(
                text(
                    "INSERT INTO retrieval_events (retrieval_id, owner, query, variant, results, "
                    "used_ids, created_at, cache_hit, parts) VALUES (:id, :owner, "
                    "'where is  the vpn', 'learned', '[]', '[\"m1\"]', '2026-01-01 00:00:00', "
                    "0, '[]')"
                ),
                {"id": f"r{number}", "owner": owner},
            )
    to("head")
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT memory_id, owner, anchor_text, uses FROM fact_anchors ORDER BY 1, 2, 3")
        ).all()
    assert [tuple(r) for r in rows] == [
        ("m1", "*", "who knows", 2),  # no logged feedback explains it
        ("m1", "alice", "where is the vpn", 2),
        ("m1", "bob", "where is the vpn", 1),
        ("m2", "shared", "the launch date", 0),
    ]
    with Session(engine) as session:
        before = read_generation(session, "fact_anchors")
    with engine.begin() as connection:  # the change counter's trigger is back
        connection.execute(text("UPDATE fact_anchors SET uses = uses + 1 WHERE owner = 'bob'"))
    with Session(engine) as session:
        assert read_generation(session, "fact_anchors") > before
    to("0005", down=True)
    with engine.connect() as connection:
        merged = connection.execute(
            text("SELECT memory_id, anchor_text FROM fact_anchors ORDER BY 1, 2")
        ).all()
    assert [tuple(r) for r in merged] == [
        ("m1", "where is the vpn"),
        ("m1", "who knows"),
        ("m2", "the launch date"),
    ]
    engine.dispose()
