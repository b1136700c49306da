"""Learning benchmark: does feedback on some questions improve retrieval (DESIGN §6)?

Protocol ``feedback-half`` on LoCoMo-format data: each conversation gets its
own fresh store. Its questions (categories 1-4) are shuffled with a fixed seed
and split in half. The first half is *replayed*: each question is asked through
``recall_with_feedback`` (all learned parts on, ``k = feedback_k``) and the
hits that are gold evidence are reported used; this is repeated ``rounds``
times (the query cache answers after 3 successes). With the default
``feedback_k = 10`` the replaying agent reports only what it was shown (DESIGN
§6); a larger ``feedback_k`` lets it "use" evidence it could never have seen in
a top-10 answer and is labelled ``oracle`` in the report. Then, with the learned state
frozen, every variant answers, with ``k = 25``:

* ``new`` — the second half (questions never fed back), split into ``new_fed``
  (at least one of its evidence turns was reported used for another question)
  and ``new_unfed``;
* ``repeat`` — the first half verbatim;
* ``reword`` — the first half reworded by :func:`reword` (drop question words,
  move a trailing clause to the front, or wrap in "Do you remember ...").

Variants: ``vector`` and ``plain`` (hybrid search, no learned parts), ``+cache``,
``+expansion``, ``+feedback``, ``+anchors``, ``+adapter`` (plain plus one part),
``learned`` (the parts the server's settings switch on, as served to an
owner pinned to ``learned``; the replay runs with them too) and
``-cache`` ... ``-adapter`` (all parts but one:
the ablation). A *false hit* is a cache answer that contains none of
the question's evidence; rates are over all questions of the set. For
``repeat`` and ``reword``, ``used_in_top10`` is the share of the memories
reported used for that question (in the last replay round) that come back in
the top 10, over the questions where some memory was reported used.

Protocol ``feedback-phrasing`` on a project suite
(:mod:`tribal_memory.bench.suite`): all facts and distractors go into one
store; half of the facts (fixed seed) get feedback on their first phrasing;
``new_fed`` are the other phrasings of those facts, ``new_unfed`` all
phrasings of the other facts, ``repeat``/``reword`` the fed phrasing.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.models import SHARED_OWNER, SearchFilters
from tribal_memory.base.results import LearnedParts, SearchMode, SearchResult
from tribal_memory.bench.learn_data import BenchQuestion, BenchStore, load, reword
from tribal_memory.bench.learn_targets import targets
from tribal_memory.bench.metrics import hit_at, percentile, recall_at, reciprocal_rank
from tribal_memory.bench.report import machine_line, write_report
from tribal_memory.embeddings.base import Embedder
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.service.memory_service import MemoryService

DEPTH = 25
SETS = ("new", "new_fed", "new_unfed", "repeat", "reword")
VARIANTS: dict[str, tuple[SearchMode, LearnedParts]] = {
    "vector": ("vector", LearnedParts.none()),
    "plain": ("hybrid", LearnedParts.none()),
    "+cache": ("hybrid", LearnedParts.only("cache")),
    "+expansion": ("hybrid", LearnedParts.only("expansion")),
    "+feedback": ("hybrid", LearnedParts.only("feedback")),
    "+anchors": ("hybrid", LearnedParts.only("anchors")),
    "+adapter": ("hybrid", LearnedParts.only("adapter")),
    "learned": ("hybrid", LearnedParts()),  # replaced by the run's settings' parts
    "-cache": ("hybrid", LearnedParts(cache=False)),
    "-expansion": ("hybrid", LearnedParts(expansion=False)),
    "-feedback": ("hybrid", LearnedParts(feedback=False)),
    "-anchors": ("hybrid", LearnedParts(anchors=False)),
    "-adapter": ("hybrid", LearnedParts(adapter=False)),
}
Log = Callable[[str], None]


@dataclass(slots=True)
class _Rows:
    rows: dict[str, dict[str, list[dict[str, float]]]] = field(
        default_factory=lambda: {v: {s: [] for s in SETS} for v in VARIANTS}
    )


def _keys(result: SearchResult) -> list[str]:
    return [str(h.memory.metadata.get("key")) for h in result.hits]


NOISE = 0.2
"""``--feedback noisy``: the chance of missing a used gold, and of reporting a non-gold."""
AGENT_FEEDBACK_K = 10
"""The most hits an agent is shown (DESIGN §6: its top k, 6-10); more is an oracle."""


def feedback_label(feedback_k: int) -> str:
    """``"agent"`` when the replay reports only what an agent is shown, else ``"oracle"``."""
    return "agent" if feedback_k <= AGENT_FEEDBACK_K else "oracle"


def _gold_hits(result: SearchResult, question: BenchQuestion) -> dict[str, str]:
    """``{memory_id: key}`` of the hits that are gold evidence of ``question``."""
    return {
        h.memory.memory_id: str(h.memory.metadata.get("key"))
        for h in result.hits
        if h.memory.metadata.get("key") in question.gold
    }


def _filters(store: BenchStore, agent: str | None) -> SearchFilters:
    """What an asker sees: the store's owner alone, or ``agent`` with the shared memories."""
    if agent is None:
        return SearchFilters(owner=store.owner, include_shared=False)
    return SearchFilters(owner=agent, include_shared=True)


def _noisy(
    found: dict[str, str], result: SearchResult, question: BenchQuestion, rng: random.Random
) -> dict[str, str]:
    """What a careless agent reports (``--feedback noisy``).

    Each used gold is missed with probability :data:`NOISE`, and one shown
    memory that is not gold is reported with probability :data:`NOISE`.
    """
    kept = {i: key for i, key in found.items() if rng.random() >= NOISE}
    others = [h.memory for h in result.hits if h.memory.metadata.get("key") not in question.gold]
    if others and rng.random() < NOISE:
        wrong = rng.choice(others)
        kept[wrong.memory_id] = str(wrong.metadata.get("key"))
    return kept


def _replay(
    service: MemoryService,
    store: BenchStore,
    rounds: int,
    feedback_k: int,
    session: bool = False,
    agent: str | None = None,
    noise: random.Random | None = None,
) -> tuple[dict[str, set[str]], int, int]:
    """Feed back the first half; returns (keys used per question, gold fed, gold total).

    The first item maps each fed question's text to the keys reported used
    for it in the last round.

    With ``session``, a question whose gold is not all in its top ``feedback_k``
    is followed, in the same agent session, by one search of the question plus
    its answer text; the gold that search shows is reported used for the first
    retrieval too (and for its own). ``agent``: the owner who asks (None: the
    store's owner; else the memories are shared and ``agent`` sees them).
    ``noise``: report as :func:`_noisy` does, drawing from this generator.
    """
    filters = _filters(store, agent)
    used: dict[str, set[str]] = {}
    gold_fed = gold_total = 0
    for round_index in range(rounds):
        for number, question in enumerate(store.fed):
            session_id = f"{store.owner}:{round_index}:{number}" if session else None
            result = service.recall_with_feedback(
                question.text,
                k=feedback_k,
                filters=filters,
                learned=service.settings.learned_parts,
                session_id=session_id,
            )
            found = _gold_hits(result, question)
            if noise is not None:
                found = _noisy(found, result, question, noise)
            if session and set(found.values()) < set(question.gold) and question.answer:
                again = service.recall_with_feedback(
                    f"{question.text} {question.answer}",
                    k=feedback_k,
                    filters=filters,
                    learned=service.settings.learned_parts,
                    session_id=session_id,
                )
                more = _gold_hits(again, question)
                service.record_usage_feedback(str(again.retrieval_id), list(more))
                found |= more
            service.record_usage_feedback(str(result.retrieval_id), list(found))
            keys = set(found.values())
            if round_index == rounds - 1:
                used[question.text] = keys
                gold_fed += len(keys & set(question.gold))
                gold_total += len(set(question.gold))
    return used, gold_fed, gold_total


def _measure(
    service: MemoryService,
    store: BenchStore,
    used: dict[str, set[str]],
    rows: _Rows,
    variants: Sequence[str],
    agent: str | None = None,
    only_new: bool = False,
) -> None:
    """Ask every set with every variant; ``used``: keys reported used per fed question.

    ``agent``: who asks (see :func:`_replay`); ``only_new``: ask the new questions only.
    """
    filters = _filters(store, agent)
    fed_keys = set().union(*used.values()) if used else set()
    rewords = [BenchQuestion(reword(q.text, i), q.gold) for i, q in enumerate(store.fed)]
    # The keys reported used for the fed question each repeat or rewording stands for.
    used_for = {q.text: used.get(q.text, set()) for q in store.fed}
    used_for.update(
        {r.text: used.get(q.text, set()) for q, r in zip(store.fed, rewords, strict=True)}
    )
    sets: dict[str, list[BenchQuestion]] = {"new": store.new}
    if not only_new:
        sets.update({"repeat": store.fed, "reword": rewords})
    for name in variants:
        mode, parts = VARIANTS[name]
        if name == "learned":
            parts = service.settings.learned_parts
        for set_name, questions in sets.items():
            for question in questions:
                started = time.perf_counter()
                result = service.search(
                    question.text, k=DEPTH, filters=filters, mode=mode, learned=parts
                )
                elapsed_ms = (time.perf_counter() - started) * 1000
                ranked = _keys(result)
                gold = question.gold
                row = {
                    "recall@5": recall_at(ranked, gold, 5),
                    "recall@10": recall_at(ranked, gold, 10),
                    "recall@25": recall_at(ranked, gold, 25),
                    "hit@5": hit_at(ranked, gold, 5),
                    "hit@10": hit_at(ranked, gold, 10),
                    "mrr": reciprocal_rank(ranked, gold),
                    "ms": elapsed_ms,
                    "cached": float(result.cached),
                    "false_hit": float(result.cached and not set(ranked) & set(gold)),
                }
                reported = used_for.get(question.text) if set_name != "new" else None
                if reported:
                    row["used_in_top10"] = len(reported & set(ranked[:10])) / len(reported)
                rows.rows[name][set_name].append(row)
                if set_name == "new":
                    split = "new_fed" if set(gold) & fed_keys else "new_unfed"
                    rows.rows[name][split].append(row)


def _summary(rows: list[dict[str, float]]) -> dict[str, Any]:
    n = len(rows)

    def mean(metric: str) -> float:
        return round(sum(r[metric] for r in rows) / n, 4) if n else 0.0

    cached = [r["ms"] for r in rows if r["cached"]]
    latencies = [r["ms"] for r in rows]
    used = [r["used_in_top10"] for r in rows if "used_in_top10" in r]
    extra = {"used_in_top10": round(sum(used) / len(used), 4) if used else None}
    return {
        "n": n,
        "recall@5": mean("recall@5"),
        "recall@10": mean("recall@10"),
        "recall@25": mean("recall@25"),
        "hit@5": mean("hit@5"),
        "hit@10": mean("hit@10"),
        "mrr": mean("mrr"),
        "p50_ms": round(percentile(latencies, 50), 2) if latencies else 0.0,
        "p95_ms": round(percentile(latencies, 95), 2) if latencies else 0.0,
        "cache_hit_rate": mean("cached"),
        "cache_hit_p50_ms": round(percentile(cached, 50), 3) if cached else None,
        "false_hit_rate": mean("false_hit"),
        **extra,
    }


def _after_feedback(variants: dict[str, Any]) -> dict[str, float | None]:
    """Search latency on the stores as the replay left them (issue 14's check).

    ``search_p50_ms``: plain hybrid search of the new questions;
    ``learned_p50_ms``: the learned variant's. None when that variant did not run.
    """
    plain, learned = variants.get("plain"), variants.get("learned")
    return {
        "search_p50_ms": plain["new"]["p50_ms"] if plain else None,
        "learned_p50_ms": learned["new"]["p50_ms"] if learned else None,
    }


_REPORTED_SETTINGS = (
    "vector_weight",
    "candidate_pool",
    "semantic_cache_threshold",
    "feedback_similarity",
    "feedback_learning_rate",
    "feedback_penalty_rate",
    "max_boost",
    "max_penalty",
    "usage_prior_weight",
    "skip_prior_weight",
    "boost_relevance_gate",
    "team_learning",
    "anchor_min_uses",
    "anchor_weight",
    "expansion_weight",
    "expansion_learned",
    "adapter_min_questions",
    "adapter_penalty",
)
"""The settings a report records (those the learned layer's figures depend on)."""


def run_learn_bench(
    stores: Sequence[BenchStore],
    *,
    dataset: str,
    protocol: str,
    seed: int,
    out: Path | None = None,
    rounds: int = 3,
    feedback_k: int = AGENT_FEEDBACK_K,
    session: bool = False,
    variants: Sequence[str] = tuple(VARIANTS),
    agents: int = 1,
    fed_limit: int | None = None,
    noisy: bool = False,
    embedder: Embedder | None = None,
    settings_overrides: dict[str, Any] | None = None,
    log: Log | None = None,
) -> dict[str, Any]:
    """Replay feedback on each store, then measure every variant (see the module docstring).

    Args:
        stores: From :func:`locomo_stores` or :func:`suite_stores`.
        dataset: Name or path recorded in the report.
        protocol: ``"feedback-half"`` or ``"feedback-phrasing"``.
        seed: The split seed (recorded).
        out: Where to write the JSON report (None: don't write).
        rounds: Times each fed question is asked and fed back.
        feedback_k: Hits per replayed retrieval: gold evidence among them is reported
            used (over :data:`AGENT_FEEDBACK_K`: an oracle, labelled so).
        session: Follow a fed question whose gold was not all shown by one
            reformulated search of the same session (see :func:`_replay`).
        variants: Which variants to measure.
        agents: 1: the store's owner asks everything. 2: the memories are
            ``shared``; agent A (``agent-a``) gets the feedback replay and is
            measured as with 1, then agent B (``agent-b``), who gave no
            feedback, asks the new questions: ``other_agent`` in each variant
            holds B's ``new``, ``new_fed`` and ``new_unfed`` (team learning).
        fed_limit: Replay only the first this many fed questions of each store
            (the learning curve); the new questions stay the same. None: all.
        noisy: The replaying agent misses each used gold with probability 0.2
            and reports one shown non-gold memory with probability 0.2.
        embedder: A loaded embedder to reuse.
        settings_overrides: Settings fields to override for every store.
        log: Progress lines (one per store).

    Raises:
        InvalidInput: ``agents`` is not 1 or 2.

    Returns:
        ``{"dataset", "protocol", "seed", "rounds", "feedback_k", "feedback", "agents"
        ("agent" or "oracle"), "feedback_coverage", "after_feedback"
        ({"search_p50_ms", "learned_p50_ms"}: latency on the fed store),
        "variants": {name: {set: {"n", "recall@5", "recall@10", "recall@25", "hit@5",
        "hit@10", "mrr", "p50_ms", "p95_ms", "cache_hit_rate", "cache_hit_p50_ms",
        "false_hit_rate"}}}, "targets", "settings", "machine"}``.
    """
    if agents not in (1, 2):
        raise InvalidInput(f"agents must be 1 or 2, not {agents}")
    overrides = settings_overrides or {}
    model = embedder or FastEmbedEmbedder(Settings(**overrides).embedding_model)
    rows, other_rows = _Rows(), _Rows()
    first, second = ("agent-a", "agent-b") if agents == 2 else (None, None)
    gold_fed = gold_total = 0
    started = time.perf_counter()
    for number, store in enumerate(stores, start=1):
        if fed_limit is not None:
            store = replace(store, fed=store.fed[:fed_limit])
        noise = random.Random(f"{seed}:{store.owner}:noise") if noisy else None
        with tempfile.TemporaryDirectory(prefix="tribal-learn-") as tmp:
            settings = Settings(data_dir=Path(tmp), **overrides)
            with MemoryService(settings, embedder=model) as service:
                memories = store.memories
                if agents == 2:
                    memories = [replace(m, owner=SHARED_OWNER) for m in memories]
                load(service, memories)
                used, fed, total = _replay(
                    service, store, rounds, feedback_k, session, agent=first, noise=noise
                )
                # The adapter a deployment fits in the background after the replay's
                # last feedback, fitted here before measuring so every run sees it.
                service.learner.adapters.wait()
                service.learner.adapters.train(first or store.owner)
                gold_fed += fed
                gold_total += total
                _measure(service, store, used, rows, variants, agent=first)
                if second is not None:
                    _measure(
                        service, store, used, other_rows, variants, agent=second, only_new=True
                    )
        if log is not None:
            log(
                f"store {number}/{len(stores)}: {len(store.memories)} memories, "
                f"{len(store.fed)} fed, "
                f"{len(store.new)} new ({time.perf_counter() - started:.0f} s)"
            )
    settings = Settings(**overrides)
    report: dict[str, Any] = {
        "dataset": dataset,
        "protocol": protocol,
        "seed": seed,
        "rounds": rounds,
        "feedback_k": feedback_k,
        "feedback": feedback_label(feedback_k)
        + (" + session" if session else "")
        + (" + noisy" if noisy else ""),
        "fed_limit": fed_limit,
        "feedback_coverage": round(gold_fed / gold_total, 4) if gold_total else 0.0,
        "agents": agents,
        "variants": {name: {s: _summary(rows.rows[name][s]) for s in SETS} for name in variants},
        "settings": {name: getattr(settings, name) for name in _REPORTED_SETTINGS},
        "learned_parts": list(settings.learned_parts.names),
        "machine": machine_line(),
    }
    if agents == 2:
        for name in variants:
            report["variants"][name]["other_agent"] = {
                s: _summary(other_rows.rows[name][s]) for s in ("new", "new_fed", "new_unfed")
            }
    report["after_feedback"] = _after_feedback(report["variants"])
    report["targets"] = targets(report)
    write_report(report, out)
    return report
