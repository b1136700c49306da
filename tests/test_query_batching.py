"""Query embeddings of concurrent searches share model calls and equal single ones."""

from __future__ import annotations

import threading

import numpy as np

from tribal_memory.embeddings.batching import QueryBatcher
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder

QUERIES = [
    "Where are the release notes kept?",
    "who owns the deploy script",
    "When does Bo review code in the afternoon or in the morning, and why?",
    "flaky test",
    "What did Dev debug in the payments service last week?",
    "project Falcon",
    "onboarding guide build cache",
    "Which cloud region hosts the staging database of the search team?",
]


def test_batched_query_embeddings_equal_single_ones(embedder: FastEmbedEmbedder) -> None:
    single = {q: embedder.embed(q, query=True) for q in QUERIES}
    batched = embedder.embed_batch(QUERIES, query=True)
    for query, vector in zip(QUERIES, batched, strict=True):
        np.testing.assert_allclose(vector, single[query], rtol=0, atol=1e-6)


def test_concurrent_callers_each_get_their_own_query_vector(embedder: FastEmbedEmbedder) -> None:
    batcher = QueryBatcher(embedder, max_batch=4)
    asked = QUERIES * 3
    found: dict[int, np.ndarray] = {}
    start = threading.Barrier(len(asked))

    def ask(i: int) -> None:
        start.wait()
        found[i] = batcher.embed(asked[i])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(asked))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(found) == list(range(len(asked)))
    for i, query in enumerate(asked):
        np.testing.assert_allclose(found[i], embedder.embed(query, query=True), rtol=0, atol=1e-6)
    # Never more calls than queries, never more than max_batch queries in one.
    assert len(asked) / 4 <= batcher.calls <= len(asked)


def test_a_lone_caller_is_embedded_at_once(embedder: FastEmbedEmbedder) -> None:
    batcher = QueryBatcher(embedder, max_batch=8)
    for query in QUERIES:
        assert np.array_equal(batcher.embed(query), embedder.embed(query, query=True))
    assert batcher.calls == len(QUERIES)
