"""The per-owner query adapter: what fitting learns, when an owner gets one, and its lifecycle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from tribal_memory.base.config import Settings
from tribal_memory.base.models import MemoryInput, SearchFilters
from tribal_memory.base.results import LearnedParts
from tribal_memory.base.tables import QueryAdapterRow
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.learned.adapter import AdapterFit, Examples, apply, fit
from tribal_memory.service.memory_service import MemoryService


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def test_fit_learns_a_map_that_carries_to_new_queries() -> None:
    """Questions and their answers differ by a fixed rotation of a few dimensions:
    a map fitted on some pairs ranks the answer first for queries it never saw."""
    rng = np.random.default_rng(0)
    dim, train, test, negatives = 16, 120, 60, 20
    rotation = np.roll(np.eye(dim), 3, axis=0)  # every dimension moves
    queries = _unit(rng.normal(size=(train + test, dim)))
    answers = _unit(queries @ rotation.T + 0.1 * rng.normal(size=queries.shape))
    others = _unit(rng.normal(size=(train + test, negatives, dim)))

    def hits(w: np.ndarray, rows: range) -> float:
        found = 0
        for n in rows:
            mapped = apply(w.astype(np.float32), queries[n].astype(np.float32))
            scores = np.concatenate([[answers[n] @ mapped], others[n] @ mapped])
            found += int(scores.argmax() == 0)
        return found / len(rows)

    examples = Examples(
        queries[:train].astype(np.float32),
        np.concatenate([answers[:train, None], others[:train]], axis=1).astype(np.float32),
        np.ones((train, negatives + 1), dtype=bool),
    )
    w = fit(examples, AdapterFit(penalty=0.01, steps=200, learning_rate=0.02))
    held_out = range(train, train + test)
    assert hits(np.eye(dim), held_out) < 0.6
    assert hits(w, held_out) > 0.9
    assert w.dtype == np.float32 and w.shape == (dim, dim)


def test_the_penalty_keeps_the_map_near_the_identity() -> None:
    rng = np.random.default_rng(1)
    queries = _unit(rng.normal(size=(30, 8))).astype(np.float32)
    candidates = _unit(rng.normal(size=(30, 5, 8))).astype(np.float32)
    examples = Examples(queries, candidates, np.ones((30, 5), dtype=bool))
    loose = fit(examples, AdapterFit(penalty=0.0))
    tight = fit(examples, AdapterFit(penalty=10.0))
    assert np.linalg.norm(tight - np.eye(8)) < np.linalg.norm(loose - np.eye(8)) / 4


FACTS = [
    ("The billing service runs on PostgreSQL 16", "which database does billing use?"),
    ("Deploys happen every Tuesday afternoon", "when do we deploy?"),
    ("The on-call rota changes on Mondays", "when does on-call change hands?"),
    ("Invoices are emailed on the first of the month", "when do invoices go out?"),
    ("The staging cluster lives in eu-west-1", "which region is staging in?"),
]


@pytest.fixture
def service(tmp_path: Path, embedder: FastEmbedEmbedder) -> Iterator[MemoryService]:
    settings = Settings(
        data_dir=tmp_path / "data", adapter_min_questions=3, adapter_retrain_every=2
    )
    with MemoryService(settings, embedder=embedder) as svc:
        yield svc


def _feed(service: MemoryService, owner: str, questions: int) -> None:
    filters = SearchFilters(owner=owner)
    for fact, question in FACTS[:questions]:
        result = service.recall_with_feedback(question, k=5, filters=filters)
        used = [h.memory.memory_id for h in result.hits if h.memory.content == fact]
        service.record_usage_feedback(str(result.retrieval_id), used, owner=owner)


def _adapter_owners(service: MemoryService) -> list[str]:
    with service.db.session() as session:
        return list(session.scalars(select(QueryAdapterRow.owner)))


def test_an_owner_gets_an_adapter_once_enough_questions_had_feedback(
    service: MemoryService,
) -> None:
    service.capture_batch([MemoryInput(fact, owner="alice") for fact, _ in FACTS])
    service.capture_batch([MemoryInput(fact, owner="bob") for fact, _ in FACTS])
    _feed(service, "alice", 2)
    service.learner.adapters.wait()
    assert _adapter_owners(service) == []  # 2 questions: under adapter_min_questions
    _feed(service, "alice", 4)
    service.learner.adapters.wait()
    assert _adapter_owners(service) == ["alice"]  # only from alice's own feedback
    # A refit replaces the map and moves its change counter (every process re-reads it).
    before = service.learner.generations("alice")[3]
    assert service.learner.adapters.train("alice")
    assert service.learner.generations("alice")[3] > before
    # The map serves alice's searches only, and plain search stays plain.
    question = "what database is billing on?"
    adapted = service.search(
        question, k=5, filters=SearchFilters(owner="alice"), learned=LearnedParts.only("adapter")
    )
    plain = service.search(
        question, k=5, filters=SearchFilters(owner="alice"), learned=LearnedParts.none()
    )
    assert adapted.hits[0].memory.content == FACTS[0][0]
    assert [h.vector_score for h in adapted.hits] != [h.vector_score for h in plain.hits]
    bob = service.search(
        question, k=5, filters=SearchFilters(owner="bob"), learned=LearnedParts.only("adapter")
    )
    bob_plain = service.search(
        question, k=5, filters=SearchFilters(owner="bob"), learned=LearnedParts.none()
    )
    assert [h.vector_score for h in bob.hits] == [h.vector_score for h in bob_plain.hits]


def test_an_adapter_goes_with_its_owner_and_travels_in_exports(service: MemoryService) -> None:
    service.capture_batch([MemoryInput(fact, owner="alice") for fact, _ in FACTS])
    _feed(service, "alice", 4)
    service.learner.adapters.wait()
    exported = "".join(service.export_jsonl(owner="alice"))
    assert '"table":"query_adapters"' in exported
    service.clear_owner("alice", confirm="alice")
    assert _adapter_owners(service) == []
