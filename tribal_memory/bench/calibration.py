"""Calibration benchmark: does a hit's score tell answerable questions from off-topic ones?

Protocol: every LoCoMo conversation is captured into one store under its own
owner (one memory per turn, as in :mod:`.locomo`). Three kinds of question are
asked, each a plain hybrid search (``k = 10``) of one owner's memories:

- **answerable**: a conversation's questions (categories 1-4 with evidence),
  asked of its own memories;
- **off-topic**: the same questions asked of the next conversation's
  memories (another pair of people, another life: nothing there answers them);
- **nonsense**: strings of unrelated words ("purple elephant saxophone
  quartet"), :data:`NONSENSE_PER_STORE` per conversation, asked of it.

The conversations are split in two: the first half (rounded up) is the fit
half, from which ``--fit`` fits the relevance model
(:func:`tribal_memory.retrieval.calibration.fit`) and the default
``min_score`` is chosen (:func:`chosen_min_score`); the rest is the held-out
half the figures are reported on. Reported per half: the AUROC of the top
hit's score (answerable against off-topic and nonsense together, and against
each), the same AUROC for the ranking score the hits had before calibration,
and for a grid of ``min_score`` values the share of answerable questions that
keep a hit, the share of off-topic and of nonsense questions that keep any
(what ``/v1/context`` would inject), and the share of evidence turns in the
top 10 that keep their place.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tribal_memory.base.config import Settings
from tribal_memory.base.models import SearchFilters
from tribal_memory.base.results import LearnedParts, SearchResult
from tribal_memory.bench.report import machine_line, stderr_line, write_report
from tribal_memory.documents.locomo import LocomoSample, load_locomo
from tribal_memory.retrieval.calibration import (
    DEFAULT_MIN_SCORE,
    DEFAULT_MODEL,
    FEATURES,
    RelevanceModel,
    features,
    fit,
    query_stems,
)
from tribal_memory.service.memory_service import MemoryService

CATEGORIES = (1, 2, 3, 4)
K = 10
NONSENSE_PER_STORE = 20
THRESHOLDS = (0.02, 0.05, 0.08, 0.1, 0.12, 0.15, 0.2, 0.3)
_WORDS = (
    "purple",
    "elephant",
    "saxophone",
    "quartet",
    "nebula",
    "turbine",
    "marmalade",
    "glacier",
    "tungsten",
    "origami",
    "zeppelin",
    "kumquat",
    "basalt",
    "harpsichord",
    "fjord",
    "quasar",
    "lichen",
    "trombone",
    "catapult",
    "obsidian",
    "walrus",
    "paprika",
    "velcro",
    "monsoon",
)
_BATCH = 64

Progress = Callable[[str], None]


@dataclass(slots=True)
class Asked:
    """One question asked of one store: its kind, hits' features, labels and scores."""

    kind: str  # answerable | off-topic | nonsense
    x: np.ndarray  # (hits, 4) features
    gold: np.ndarray  # (hits,) 1 where the hit is an evidence turn
    scores: np.ndarray  # (hits,) calibrated score as served
    rank_scores: np.ndarray  # (hits,) ranking score before calibration


def nonsense_strings(n: int, seed: int = 7) -> list[str]:
    """``n`` strings of 3 to 5 unrelated words, the same for the same ``seed``."""
    rng = random.Random(seed)
    return [" ".join(rng.sample(_WORDS, rng.randint(3, 5))) for _ in range(n)]


def _asked(
    service: MemoryService, query: str, owner: str, gold: frozenset[str], kind: str
) -> Asked:
    result: SearchResult = service.search(
        query,
        k=K,
        filters=SearchFilters(owner=owner, include_shared=False),
        mode="hybrid",
        learned=LearnedParts.none(),
    )
    stems = query_stems(query)
    hits = result.hits
    cosine_range = result.cosine_range or (0.0, 0.0)
    x = np.array([features(h, stems, cosine_range) for h in hits], dtype=np.float64)
    return Asked(
        kind,
        x.reshape(len(hits), len(FEATURES)),
        np.array([str(h.memory.metadata.get("dia_id")) in gold for h in hits], dtype=np.float64),
        np.array([h.score for h in hits]),
        np.array([h.rank_score if h.rank_score is not None else h.score for h in hits]),
    )


def _ask_all(
    service: MemoryService, samples: Sequence[LocomoSample], emit: Progress | None
) -> list[list[Asked]]:
    """Per conversation, every question asked (answerable, off-topic, nonsense)."""
    nonsense = nonsense_strings(NONSENSE_PER_STORE * len(samples))
    per_sample: list[list[Asked]] = []
    for i, sample in enumerate(samples):
        other = samples[(i + 1) % len(samples)].sample_id
        asked: list[Asked] = []
        for q in sample.questions:
            if q.category not in CATEGORIES or not q.evidence:
                continue
            gold = frozenset(q.evidence)
            asked.append(_asked(service, q.question, sample.sample_id, gold, "answerable"))
            asked.append(_asked(service, q.question, other, frozenset(), "off-topic"))
        for text in nonsense[i * NONSENSE_PER_STORE : (i + 1) * NONSENSE_PER_STORE]:
            asked.append(_asked(service, text, sample.sample_id, frozenset(), "nonsense"))
        per_sample.append(asked)
        if emit is not None:
            emit(f"conversation {i + 1} of {len(samples)}: {len(asked)} searches")
    return per_sample


def auroc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """Area under the ROC curve: P(a positive outscores a negative), ties counting half.

    Returns:
        In [0, 1]; 0.5 when either list is empty.
    """
    if not len(positive) or not len(negative):
        return 0.5
    values = np.concatenate([np.asarray(positive, float), np.asarray(negative, float)])
    order = values.argsort(kind="mergesort")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    start = 0
    while start < len(values):  # average ranks over ties
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    n_pos = len(positive)
    return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * len(negative)))


def _scored(asked: Sequence[Asked], model: RelevanceModel | None) -> list[np.ndarray]:
    """Each search's hit scores under ``model`` (None: as served)."""
    if model is None:
        return [a.scores for a in asked]
    return [model.probabilities(a.x) for a in asked]


def _top(scores: np.ndarray) -> float:
    return float(scores[0]) if len(scores) else 0.0


def half_report(asked: Sequence[Asked], model: RelevanceModel | None) -> dict[str, Any]:
    """The figures of one half (see the module docstring) with hits scored by ``model``."""
    scores = _scored(asked, model)
    tops: dict[str, list[float]] = {"answerable": [], "off-topic": [], "nonsense": []}
    rank_tops: dict[str, list[float]] = {"answerable": [], "off-topic": [], "nonsense": []}
    for a, s in zip(asked, scores, strict=True):
        tops[a.kind].append(_top(s))
        rank_tops[a.kind].append(_top(a.rank_scores))
    unanswerable = tops["off-topic"] + tops["nonsense"]
    answerable = [(a, s) for a, s in zip(asked, scores, strict=True) if a.kind == "answerable"]
    gold_in_top = sum(float(a.gold.sum()) for a, _ in answerable) or 1.0
    by_threshold = {}
    for t in THRESHOLDS:
        by_threshold[f"{t:g}"] = {
            "answerable_keep": _share(tops["answerable"], t),
            "off_topic_inject": _share(tops["off-topic"], t),
            "nonsense_inject": _share(tops["nonsense"], t),
            "evidence_kept": round(
                sum(float(a.gold[s >= t].sum()) for a, s in answerable) / gold_in_top, 4
            ),
            "hits_per_answerable": round(
                float(np.mean([int((s >= t).sum()) for _, s in answerable] or [0])), 2
            ),
        }
    return {
        "n": {kind: len(values) for kind, values in tops.items()},
        "auroc": round(auroc(tops["answerable"], unanswerable), 4),
        "auroc_off_topic": round(auroc(tops["answerable"], tops["off-topic"]), 4),
        "auroc_nonsense": round(auroc(tops["answerable"], tops["nonsense"]), 4),
        "auroc_rank_score": round(
            auroc(rank_tops["answerable"], rank_tops["off-topic"] + rank_tops["nonsense"]), 4
        ),
        "median_top": {k: round(float(np.median(v)), 4) for k, v in tops.items() if v},
        "by_min_score": by_threshold,
        "reliability": _reliability(asked, scores),
    }


def _share(values: Sequence[float], threshold: float) -> float:
    return round(float(np.mean([v >= threshold for v in values])) if values else 0.0, 4)


def _reliability(asked: Sequence[Asked], scores: Sequence[np.ndarray]) -> list[dict[str, Any]]:
    """Mean predicted score against the observed share of evidence hits, per score bin."""
    predicted = np.concatenate([s for s in scores if len(s)])
    observed = np.concatenate([a.gold for a in asked if len(a.gold)])
    edges = (0.0, 0.01, 0.05, 0.1, 0.2, 0.4, 1.0001)
    rows = []
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        inside = (predicted >= low) & (predicted < high)
        if inside.any():
            rows.append(
                {
                    "bin": f"[{low:g}, {min(high, 1.0):g})",
                    "n": int(inside.sum()),
                    "predicted": round(float(predicted[inside].mean()), 4),
                    "observed": round(float(observed[inside].mean()), 4),
                }
            )
    return rows


def chosen_min_score(fit_report: dict[str, Any]) -> float:
    """The grid ``min_score`` with the best Youden index on the fit half.

    Youden's J (Youden, "Index for rating diagnostic tests", Cancer 1950):
    share of answerable questions keeping a hit minus share of off-topic ones
    keeping any; ties go to the higher ``min_score`` (the safer one).
    """

    def youden(t: float) -> float:
        row = fit_report["by_min_score"][f"{t:g}"]
        return float(row["answerable_keep"] - row["off_topic_inject"])

    return max(reversed(THRESHOLDS), key=youden)


def run_calibration_bench(
    path: Path,
    out: Path | None,
    *,
    refit: bool = False,
    limit_samples: int | None = None,
    progress: bool = True,
    log: Progress | None = None,
) -> dict[str, Any]:
    """Run the calibration benchmark on the LoCoMo-format file at ``path``.

    Args:
        path: LoCoMo-format JSON (e.g. ``../shared/data/locomo-dev.json``).
        out: Where to write the JSON report (None: don't write).
        refit: Fit the relevance model on the fit half and report both halves
            with it (the shipped :data:`DEFAULT_MODEL` is reported beside it).
        limit_samples: Only the first N conversations (at least 2).
        progress: Print a line per conversation via ``log``.
        log: Where progress lines go (default: stderr).

    Returns:
        ``{"dataset", "fit_conversations", "held_out_conversations"`` (1-based
        positions in the file: the report names no conversation of the data),
        "default_min_score", "model", "fit", "held_out", "fitted"?, "machine"}``
        where ``fit``/``held_out`` are :func:`half_report` dicts of the scores as served.

    Raises:
        InvalidInput: ``path`` is not a readable LoCoMo-format file.
        ValueError: fewer than two conversations.
    """
    samples = load_locomo(path)[:limit_samples]
    if len(samples) < 2:
        raise ValueError("the calibration benchmark needs at least two conversations")
    emit = (log or stderr_line) if progress else None
    with (
        tempfile.TemporaryDirectory(prefix="tribal-bench-") as tmp,
        MemoryService(Settings(data_dir=Path(tmp))) as service,
    ):
        for sample in samples:
            memories = list(sample.memories)
            for start in range(0, len(memories), _BATCH):
                service.capture_batch(memories[start : start + _BATCH])
        service.optimize()
        per_sample = _ask_all(service, samples, emit)
    n_fit = (len(samples) + 1) // 2
    fit_half = [a for asked in per_sample[:n_fit] for a in asked]
    held_half = [a for asked in per_sample[n_fit:] for a in asked]
    report: dict[str, Any] = {
        "dataset": str(path),
        "fit_conversations": list(range(1, n_fit + 1)),
        "held_out_conversations": list(range(n_fit + 1, len(samples) + 1)),
        "default_min_score": DEFAULT_MIN_SCORE,
        "model": {
            "intercept": DEFAULT_MODEL.intercept,
            "weights": dict(zip(FEATURES, DEFAULT_MODEL.weights, strict=True)),
        },
        "fit": half_report(fit_half, None),
        "held_out": half_report(held_half, None),
    }
    if refit:
        x = np.vstack([a.x for a in fit_half if len(a.x)])
        y = np.concatenate([a.gold for a in fit_half if len(a.gold)])
        model = fit(x, y)
        fit_figures = half_report(fit_half, model)
        report["fitted"] = {
            "intercept": model.intercept,
            "weights": dict(zip(FEATURES, model.weights, strict=True)),
            "min_score": chosen_min_score(fit_figures),
            "fit": fit_figures,
            "held_out": half_report(held_half, model),
        }
    report["machine"] = machine_line()
    write_report(report, out)
    return report
