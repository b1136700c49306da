"""The after-feedback phase of ``bench perf``: replay agents' feedback, then time searches.

Issue 14: a store that agents have given feedback to must search about as
fast as a fresh one. The replay makes feedback weights, anchors and
query-cache entries the way agents shown the top 10 would; the timed searches
then run on the store it left.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx

from tribal_memory.bench.perf_corpus import Fact, questions
from tribal_memory.bench.perf_http import (
    SEARCH_K,
    Log,
    check_response,
    p50_p95,
    search_call,
    timed,
)


def replay_feedback(
    client: httpx.Client, facts: Sequence[Fact], fed: Sequence[str], rounds: int
) -> int:
    """Search each of ``fed`` ``rounds`` times with feedback, as an agent shown the top 10 would.

    The agent reports as used the hits that answer the question (the facts it
    was generated from) and nothing when none was shown. Round after round
    this makes feedback weights, then anchors (two uses) and query-cache
    entries (three), the way agents using the server do (issue 14).

    Returns:
        The number of searches made (``len(fed) * rounds``).
    """
    answers = answers_of(facts)
    searches = 0
    for _ in range(rounds):
        for query in fed:
            search_and_report(client, query, answers)
            searches += 1
    return searches


def after_feedback(
    client: httpx.Client,
    facts: Sequence[Fact],
    *,
    searches: int,
    seed: int,
    samples: int,
    warmup: int,
    log: Log,
) -> dict[str, Any]:
    """Replay ``searches`` searches with feedback, then time searches on the store they left.

    The questions are split: the fed ones are asked in 3 rounds (about
    ``searches`` in all); the timed ones were never fed back, so a learned
    search misses the cache and computes every learned part. Store health
    (``GET /v1/stats``) is read right after the replay.

    Returns:
        ``after_feedback_searches``, ``after_feedback_search_p50_ms`` /
        ``_p95_ms`` (plain hybrid, ``learned: []``),
        ``after_feedback_learned_p50_ms`` / ``_p95_ms`` (the default learned
        variant; ``after_feedback_learned_cache_hit_rate``: the share of those
        answered from the cache), ``after_feedback_interleaved_p50_ms`` /
        ``_p95_ms`` (each search right after a feedback: :func:`interleaved`),
        ``after_feedback_fragments``, ``_small_fragments``,
        ``_unindexed_rows``, ``_versions``.
    """
    rounds = 3
    timed_n = max(50, min(samples, 300))
    pool = questions(facts, searches // rounds + timed_n, seed + 2)
    measured, fed = pool[:timed_n], pool[timed_n:]
    log(f"  replaying feedback: {len(fed)} questions x {rounds} rounds")
    started = time.perf_counter()
    done = replay_feedback(client, facts, fed, rounds)
    figures: dict[str, Any] = {
        "after_feedback_searches": done,
        "after_feedback_replay_s": round(time.perf_counter() - started, 1),
    }
    stats = client.get("/v1/stats")
    check_response(stats, "stats")
    health = stats.json()
    for name in ("fragments", "small_fragments", "unindexed_rows", "versions"):
        figures[f"after_feedback_{name}"] = health[name]
    plain = search_call(client, {"learned": []})
    timed(plain, measured, warmup)
    figures["after_feedback_search_p50_ms"], figures["after_feedback_search_p95_ms"] = p50_p95(
        timed(plain, measured, samples)
    )
    learned = search_call(client, {})
    timed(learned, measured, warmup)
    times, hits = [], 0
    for i in range(samples):
        started = time.perf_counter()
        body: Any = learned(measured[i % len(measured)])
        times.append((time.perf_counter() - started) * 1000)
        hits += bool(body["cached"])
    figures["after_feedback_learned_p50_ms"], figures["after_feedback_learned_p95_ms"] = p50_p95(
        times
    )
    # Never fed back themselves, a few may still hit the cache through a fed question
    # within the semantic threshold that names the same numbers.
    figures["after_feedback_learned_cache_hit_rate"] = round(hits / samples, 4)
    figures.update(interleaved(client, facts, measured, samples))
    return figures


def answers_of(facts: Sequence[Fact]) -> dict[str, set[str]]:
    """Question -> the contents of the facts that answer it."""
    answers: dict[str, set[str]] = {}
    for fact in facts:
        answers.setdefault(fact.question, set()).add(fact.content)
    return answers


def search_and_report(client: httpx.Client, query: str, answers: dict[str, set[str]]) -> float:
    """One search with feedback, then feedback on the hits that answer it; the search's ms."""
    started = time.perf_counter()
    response = client.post("/v1/search", json={"query": query, "k": SEARCH_K, "feedback": True})
    elapsed = (time.perf_counter() - started) * 1000
    check_response(response, "search with feedback")
    body = response.json()
    gold = answers.get(query, set())
    used = [h["memory_id"] for h in body["hits"] if h["content"] in gold]
    feedback = {"retrieval_id": body["retrieval_id"], "used_ids": used}
    check_response(client.post("/v1/feedback", json=feedback), "feedback")
    return elapsed


def interleaved(
    client: httpx.Client, facts: Sequence[Fact], questions_: Sequence[str], samples: int
) -> dict[str, float]:
    """Time searches that each follow a feedback, as an agent's search -> use -> report loop.

    Every feedback changes the learned tables, so the search after it cannot
    reuse the learned indexes the previous one built; this is what an agent
    that reports after each answer meets. The first 10 are untimed.

    Returns:
        ``after_feedback_interleaved_p50_ms`` / ``_p95_ms``: the searches (with
        ``feedback: true``, default learned variant), not the feedback calls.
    """
    answers = answers_of(facts)
    n = max(20, min(samples, 100))
    times = [
        search_and_report(client, questions_[i % len(questions_)], answers) for i in range(n + 10)
    ]
    times = times[10:]
    p50, p95 = p50_p95(times)
    return {"after_feedback_interleaved_p50_ms": p50, "after_feedback_interleaved_p95_ms": p95}
