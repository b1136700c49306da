"""The change log of the learned tables (migration 0009) and the indexes patched from it.

After a feedback a search reads only the learned rows that changed since the
index it holds was built. These tests check that an index patched that way is
the index a full rebuild gives, row for row, so no answer changes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from builders import stored_memory
from sqlalchemy import delete, event, insert, select

from tribal_memory.base.config import Settings
from tribal_memory.base.db import Database, make_engine, migrate
from tribal_memory.base.generation_triggers import KEEP_CHANGES
from tribal_memory.base.models import SHARED_OWNER
from tribal_memory.base.sql import read_changes, read_generation
from tribal_memory.base.tables import LearnedChangeRow, QueryCacheRow, QueryFactWeightRow, utcnow
from tribal_memory.learned import query_cache
from tribal_memory.learned.anchors import AnchorIndex, owners_for
from tribal_memory.learned.feedback import FeedbackTracker
from tribal_memory.learned.memo import RowsByKey, changed_keys
from tribal_memory.learned.query_cache import CacheEntry, PastQueries, QueryCache

OWNER = "agent-a"
COUNTER = QueryCache.generation_name(OWNER)
DIM = 8


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    engine = make_engine(tmp_path / "learned.sqlite3")
    migrate(engine)
    database = Database(engine)
    yield database
    database.close()


def _generation(db: Database, name: str = COUNTER) -> int:
    with db.session() as session:
        return read_generation(session, name)


def _entry(key: str, rng: random.Random, *, vector: bool = True) -> QueryCacheRow:
    return QueryCacheRow(
        owner=OWNER,
        query_key=key,
        query_text=f"question {key}?",
        memory_ids=[],
        hits=[],
        success_count=rng.randint(0, 4),
        failure_count=rng.randint(0, 2),
        query_vector=np.array([rng.gauss(0, 1) for _ in range(DIM)], np.float32).tobytes()
        if vector
        else None,
    )


def test_each_counted_change_logs_its_key(db: Database) -> None:
    rng = random.Random(1)
    with db.session() as session:
        session.add_all([_entry("b", rng), _entry("a", rng)])
    first = _generation(db)
    with db.session() as session:
        session.add(QueryFactWeightRow(owner=OWNER, query_key="c", memory_id="m1", weight=0.5))
        session.execute(delete(QueryCacheRow).where(QueryCacheRow.query_key == "a"))
    last = _generation(db)
    with db.session() as session:
        assert read_changes(session, COUNTER, 0, first) == {"a", "b"}
        assert read_changes(session, COUNTER, first, last) == {"a", "c"}
        assert read_changes(session, COUNTER, last, last) == set()
        assert read_changes(session, COUNTER, last, first) is None  # the counter went back
        # A change the log no longer holds: the caller must read everything.
        session.execute(delete(LearnedChangeRow).where(LearnedChangeRow.generation == last))
    with db.session() as session:
        assert read_changes(session, COUNTER, first, last) is None
        assert read_changes(session, COUNTER, 0, KEEP_CHANGES + 1) is None


def test_the_log_keeps_the_last_changes_per_counter(db: Database) -> None:
    rows = [
        {"owner": OWNER, "query_key": "k", "memory_id": f"m{i}", "weight": 0.5}
        for i in range(KEEP_CHANGES + 5)
    ]
    with db.session() as session:
        session.execute(insert(QueryFactWeightRow), rows)
    with db.session() as session:
        kept = session.scalars(
            select(LearnedChangeRow.generation).where(LearnedChangeRow.name == COUNTER)
        ).all()
        assert sorted(kept) == list(range(6, KEEP_CHANGES + 6))
        assert read_changes(session, COUNTER, 5, KEEP_CHANGES + 5) == {"k"}
        assert read_changes(session, COUNTER, 4, KEEP_CHANGES + 5) is None


@pytest.mark.parametrize("seed", range(6))
def test_a_patched_past_query_index_is_the_rebuilt_one(
    db: Database, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    patches: list[int] = []
    patch = query_cache._patched

    def counted(*args: Any) -> PastQueries:
        patches.append(1)
        return patch(*args)

    monkeypatch.setattr(query_cache, "_patched", counted)
    rng = random.Random(seed)
    cache = QueryCache(db, min_successes=2, min_success_rate=0.6)
    keys = [f"key {i:03d}" for i in range(40)]
    with db.session() as session:
        session.add_all([_entry(k, rng, vector=rng.random() > 0.1) for k in keys[:30]])
    assert cache.past_queries(OWNER) is not None
    for round_ in range(5):  # rounds of changes: new entries, counts, vectors, deletions
        with db.session() as session:
            for key in rng.sample(keys, 6):
                row = session.get(QueryCacheRow, (OWNER, key))
                action = rng.random()
                if row is None:
                    session.add(_entry(key, rng, vector=rng.random() > 0.2))
                elif action < 0.3:
                    session.delete(row)
                elif action < 0.6:
                    row.success_count += 1
                elif action < 0.8:
                    row.failure_count += 1
                else:
                    row.query_vector = _entry(key, rng).query_vector
            weighted = rng.choice(keys)  # a weight change counts too, with its key
            session.add(
                QueryFactWeightRow(
                    owner=OWNER, query_key=weighted, memory_id=f"m{round_}", weight=0.1
                )
            )
        patched = cache.past_queries(OWNER)
        assert patches, "the index was rebuilt, not patched"
        patches.clear()
        rebuilt = QueryCache(db, min_successes=2, min_success_rate=0.6).past_queries(OWNER)
        assert patched is not None and rebuilt is not None
        assert patched.generation == rebuilt.generation == _generation(db)
        assert patched.keys == rebuilt.keys == sorted(patched.keys)
        assert patched.texts == rebuilt.texts
        assert patched.eligible_keys == rebuilt.eligible_keys
        assert np.array_equal(patched.eligible, rebuilt.eligible)
        assert patched.matrix.dtype == rebuilt.matrix.dtype
        assert np.array_equal(patched.matrix, rebuilt.matrix)
        for _ in range(5):
            vector = [rng.gauss(0, 1) for _ in range(DIM)]
            assert patched.similar(vector, min_similarity=-1.0) == rebuilt.similar(
                vector, min_similarity=-1.0
            )


WORDS = [
    "vpn",
    "host",
    "port",
    "deploy",
    "prod",
    "tuesday",
    "rotation",
    "monday",
    "cluster",
    "region",
    "react",
    "token",
]
MEMORIES = [f"m{i}" for i in range(12)]


@pytest.mark.parametrize("seed", range(4))
def test_a_patched_anchor_corpus_answers_as_a_reloaded_one(
    db: Database, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    patches: list[int] = []
    patch = AnchorIndex._patch

    def counted(self: AnchorIndex, *args: Any) -> None:
        patches.append(1)
        patch(self, *args)

    monkeypatch.setattr(AnchorIndex, "_patch", counted)
    rng = random.Random(seed)
    index = AnchorIndex(db, min_uses=2, max_per_memory=3, min_match=0.3)
    owners = ["a", "b", SHARED_OWNER]

    def text() -> str:
        return " ".join(rng.sample(WORDS, rng.randint(1, 4)))

    for memory_id in MEMORIES:
        index.add(memory_id, text(), rng.choice(owners))
    assert index.search("vpn host", 10, owners=None)  # loads the corpus
    for _ in range(6):  # rounds of uses (promotions, pruning), additions and removals
        for _ in range(8):
            action, memory_id, owner = rng.random(), rng.choice(MEMORIES), rng.choice(owners)
            if action < 0.6:
                index.reinforce(memory_id, text(), owner)
            elif action < 0.8:
                index.add(memory_id, text(), owner)
            else:
                for anchor in index.anchors_of(memory_id)[:1]:
                    index.remove(memory_id, anchor.text)
        reloaded = AnchorIndex(db, min_uses=2, max_per_memory=3, min_match=0.3)
        for _ in range(10):
            query, scope = text(), rng.choice([None, *owners])
            scoped = owners_for(scope) if scope is not None else None
            assert index.search(query, 5, owners=scoped) == reloaded.search(query, 5, owners=scoped)
        assert index.active_count() == reloaded.active_count()
        assert patches, "the corpus was reloaded, not patched"
        patches.clear()


def test_a_kept_cache_answer_is_read_again_only_when_its_own_entry_changes(
    db: Database,
) -> None:
    cache = QueryCache(db, min_successes=1, min_success_rate=0.5)
    deploy = stored_memory("m1", "Deploys run on Fridays.", owner=OWNER)
    vpn = stored_memory("m2", "The VPN host is vpn.example.org.", owner=OWNER)
    for key in ("a", "b"):
        cache.record(OWNER, key, f"question {key}?", None, [(deploy, 0.8)])

    def lookup(key: str) -> tuple[CacheEntry | None, int]:
        """The entry a search finds, and how many SQL reads of entries it took."""
        reads: list[str] = []

        def capture(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            if "query_cache.hits" in statement:
                reads.append(statement)

        event.listen(db.engine, "before_cursor_execute", capture)
        try:
            return cache.lookup(OWNER, key, generation=_generation(db)), len(reads)
        finally:
            event.remove(db.engine, "before_cursor_execute", capture)

    def used(entry: CacheEntry | None) -> list[str]:
        assert entry is not None
        return [hit.memory.memory_id for hit in entry.hits]

    entry, reads = lookup("a")
    assert (used(entry), reads) == (["m1"], 1)
    cache.record(OWNER, "b", "question b?", None, [(vpn, 0.7)])  # feedback on another question
    entry, reads = lookup("a")
    assert (used(entry), reads) == (["m1"], 0)  # still kept: the log does not name "a"
    cache.record(OWNER, "a", "question a?", None, [(vpn, 0.9)])
    entry, reads = lookup("a")
    assert (sorted(used(entry)), reads) == (["m1", "m2"], 1)
    # When the log cannot say what changed, every kept entry is read again.
    cache.record(OWNER, "b", "question b?", None, [(deploy, 0.6)])
    with db.session() as session:
        session.execute(delete(LearnedChangeRow))
    entry, reads = lookup("a")
    assert (sorted(used(entry)), reads) == (["m1", "m2"], 1)


def test_memoised_rows_of_unchanged_keys_survive_a_change(db: Database) -> None:
    def read_all(owner: str, keys: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
        found: dict[str, list[tuple[str, float]]] = {}
        with db.session() as session:
            for row in session.scalars(
                select(QueryFactWeightRow).where(
                    QueryFactWeightRow.owner == owner, QueryFactWeightRow.query_key.in_(keys)
                )
            ):
                found.setdefault(row.query_key, []).append((row.memory_id, row.weight))
        return {key: sorted(rows) for key, rows in found.items()}

    asked: list[list[str]] = []

    def read(owner: str, keys: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
        asked.append(sorted(keys))
        return read_all(owner, keys)

    memo = RowsByKey(read, changed=changed_keys(db))
    with db.session() as session:
        for key in ("a", "b", "c"):
            session.add(QueryFactWeightRow(owner=OWNER, query_key=key, memory_id="m", weight=0.1))
    keys = ["a", "b", "c", "d"]
    assert memo.get(OWNER, keys, _generation(db)) == read_all(OWNER, keys) | {"d": []}
    asked.clear()
    with db.session() as session:
        session.add(QueryFactWeightRow(owner=OWNER, query_key="b", memory_id="n", weight=0.2))
        session.add(QueryFactWeightRow(owner=OWNER, query_key="d", memory_id="n", weight=0.3))
    assert memo.get(OWNER, keys, _generation(db)) == read_all(OWNER, keys)
    assert asked == [["b", "d"]]  # only what changed is read again
    asked.clear()
    # Without a log to read the memo forgets everything, as before migration 0009.
    with db.session() as session:
        session.add(QueryFactWeightRow(owner=OWNER, query_key="c", memory_id="n", weight=0.4))
    with db.session() as session:
        session.execute(delete(LearnedChangeRow))
    assert memo.get(OWNER, keys, _generation(db)) == read_all(OWNER, keys)
    assert asked == [keys]


def test_a_memo_starts_with_all_rows_and_rereads_only_what_changed(db: Database) -> None:
    def weights(owner: str, keys: Sequence[str] | None) -> dict[str, list[tuple[str, float]]]:
        found: dict[str, list[tuple[str, float]]] = {}
        query = select(QueryFactWeightRow).where(QueryFactWeightRow.owner == owner)
        if keys is not None:
            query = query.where(QueryFactWeightRow.query_key.in_(keys))
        with db.session() as session:
            for row in session.scalars(query):
                found.setdefault(row.query_key, []).append((row.memory_id, row.weight))
        return {key: sorted(rows) for key, rows in found.items()}

    reads: list[list[str] | None] = []

    def read(owner: str, keys: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
        reads.append(sorted(keys))
        return weights(owner, keys)

    def read_all(owner: str, limit: int) -> dict[str, list[tuple[str, float]]] | None:
        reads.append(None)
        found = weights(owner, None)
        return found if sum(map(len, found.values())) <= limit else None

    with db.session() as session:
        for key in ("a", "b", "c"):
            session.add(QueryFactWeightRow(owner=OWNER, query_key=key, memory_id="m", weight=0.1))
    memo = RowsByKey(read, read_all=read_all, changed=changed_keys(db))
    keys = ["a", "b", "d"]
    assert memo.get(OWNER, keys, _generation(db)) == weights(OWNER, keys) | {"d": []}
    assert memo.get(OWNER, ["c", "e"], _generation(db)) == weights(OWNER, ["c"]) | {"e": []}
    assert reads == [None]  # one read of everything; keys first met cost no SQL
    reads.clear()
    with db.session() as session:
        session.add(QueryFactWeightRow(owner=OWNER, query_key="e", memory_id="n", weight=0.3))
        session.execute(delete(QueryFactWeightRow).where(QueryFactWeightRow.query_key == "a"))
    everything = ["a", "b", "c", "d", "e"]
    current = {key: [] for key in everything} | weights(OWNER, everything)
    assert memo.get(OWNER, everything, _generation(db)) == current
    assert reads == [["a", "e"]]  # only the changed keys, at once
    # An owner with more rows than the bound is read key by key.
    reads.clear()
    lazy = RowsByKey(read, read_all=read_all, changed=changed_keys(db), preload_rows=2)
    assert lazy.get(OWNER, ["b", "d"], _generation(db)) == {"b": current["b"], "d": []}
    assert lazy.get(OWNER, ["c"], _generation(db)) == {"c": current["c"]}
    assert reads == [None, ["b", "d"], ["c"]]
    # A lazy memo holds at most max_keys keys: the third key starts it over.
    reads.clear()
    bounded = RowsByKey(read, changed=changed_keys(db), max_keys=2)
    for key in ("b", "c", "d", "d", "c", "b"):
        assert bounded.get(OWNER, [key], _generation(db)) == {key: current[key]}
    assert reads == [["b"], ["c"], ["d"], ["c"], ["b"]]


def _add_random_weights(
    db: Database, rng: random.Random, *, keys: int, memories: int, per_key: int
) -> None:
    """``per_key`` weights in [-1, 1], up to 60 days old, under each of ``keys`` query keys."""
    rows = [
        {
            "owner": OWNER,
            "query_key": f"key {k}",
            "memory_id": f"m{m:03d}",
            "weight": rng.uniform(-1, 1),
            "updated_at": utcnow() - timedelta(days=rng.uniform(0, 60)),
        }
        for k in range(keys)
        for m in rng.sample(range(memories), per_key)
    ]
    with db.session() as session:
        session.execute(insert(QueryFactWeightRow), rows)


def test_pool_priors_read_the_pools_weights_through_the_memory_index(db: Database) -> None:
    _add_random_weights(db, random.Random(3), keys=30, memories=400, per_key=40)
    tracker = FeedbackTracker.from_settings(db, Settings())
    statements: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        statements.append((statement, parameters))

    now = utcnow()
    pool = [f"m{m:03d}" for m in range(0, 400, 3)]
    event.listen(db.engine, "before_cursor_execute", capture)
    try:
        some = tracker.priors(OWNER, now, pool)
    finally:
        event.remove(db.engine, "before_cursor_execute", capture)
    every = tracker.priors(OWNER, now, [f"m{m:03d}" for m in range(400)])
    assert some == pytest.approx({m: p for m, p in every.items() if m in pool})
    whole = tracker._read_priors(OWNER, now)
    assert set(some) == {m for m in whole if m in pool}
    for memory_id, prior in some.items():
        assert prior.used == pytest.approx(whole[memory_id].used, rel=1e-12)
        assert prior.skipped == pytest.approx(whole[memory_id].skipped, rel=1e-12)
    (statement, parameters), *_ = [s for s in statements if "query_fact_weights" in s[0]]
    with db.engine.connect() as connection:
        plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
    assert "ix_query_fact_weights_memory" in str(plan)


def test_priors_after_each_change_equal_the_sums_sql_computes(db: Database) -> None:
    """Priors from the in-memory weights, patched by the change log, match SQL's sums.

    Each step changes the weights the way feedback and deletions do (a weight
    moved, a new (query, memory) pair, every weight of a memory under one key
    removed, a new key) and asks for the priors of every memory at the new
    generation, twice, so both the first-search and the all-priors paths run.
    """
    rng = random.Random(11)
    now = utcnow()
    _add_random_weights(db, rng, keys=20, memories=120, per_key=12)
    tracker = FeedbackTracker.from_settings(db, Settings())
    every = [f"m{m:03d}" for m in range(130)]
    weights = QueryFactWeightRow

    def check() -> None:
        whole = tracker._read_priors(OWNER, now)
        for _ in range(2):
            found = tracker.priors(OWNER, now, every, generation=_generation(db))
            assert set(found) == set(whole)
            for memory_id, prior in found.items():
                assert prior.used == pytest.approx(whole[memory_id].used, rel=1e-9)
                assert prior.skipped == pytest.approx(whole[memory_id].skipped, rel=1e-9)

    check()
    for step in range(12):
        with db.session() as session:
            row = session.scalars(select(weights).where(weights.owner == OWNER).limit(1)).first()
            assert row is not None
            row.weight = -row.weight if step % 2 else 0.0
            key = f"key {rng.randrange(20)}"
            memory = session.scalars(
                select(weights.memory_id).where(weights.owner == OWNER, weights.query_key == key)
            ).first()
            session.execute(
                delete(weights).where(
                    weights.owner == OWNER, weights.query_key == key, weights.memory_id == memory
                )
            )
            session.add(
                weights(
                    owner=OWNER,
                    query_key=f"key {20 + step}",
                    memory_id=f"m{120 + step % 10:03d}",
                    weight=rng.uniform(-1, 1),
                    updated_at=now - timedelta(days=rng.uniform(0, 10)),
                )
            )
        check()


def _bump(db: Database, name: str) -> None:
    """One committed change of ``name``'s counter, through a cache row (its trigger)."""
    rng = random.Random(len(name))
    with db.session() as session:
        session.add(_entry(f"bump-{_generation(db, name)}", rng))


def test_the_counters_are_reread_after_any_connection_commits(tmp_path: Path) -> None:
    engine = make_engine(tmp_path / "learned.sqlite3")
    migrate(engine)
    first, second = Database(engine), Database(make_engine(tmp_path / "learned.sqlite3"))
    try:
        statements: list[str] = []
        event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        names = [COUNTER, "fact_anchors"]
        assert first.generations(names) == {COUNTER: 0, "fact_anchors": 0}
        read = len(statements)
        assert first.generations(names) == {COUNTER: 0, "fact_anchors": 0}
        assert len(statements) == read  # nothing committed since: not read again
        _bump(first, COUNTER)  # this process, another pooled connection
        assert first.generations(names)[COUNTER] == 1
        _bump(second, COUNTER)  # another engine on the same file, as another process
        assert first.generations(names)[COUNTER] == 2
        assert first.generations([COUNTER]) == {COUNTER: 2}
    finally:
        first.close()
        second.close()
