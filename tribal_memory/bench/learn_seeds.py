"""Several splits of the learning benchmark as one report: means, spreads, per-seed lifts.

One split of LoCoMo's questions moves a variant's recall by a point or two
either way, as much as the lifts being measured, so ``bench learn --seeds``
runs the benchmark once per split seed and reports, per variant and set,
each metric's mean over the seeds, the sample standard deviation of
recall@10, hit@5 and MRR (``<metric>_sd``), and each seed's recall@10 lift
over ``plain``, so a reader can see whether a lift holds on every split.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from tribal_memory.bench.learn_targets import targets

SPREAD = ("recall@10", "hit@5", "mrr")
"""Metrics whose standard deviation over the seeds is reported."""


def _mean(values: list[float]) -> float:
    return round(statistics.fmean(values), 4)


def _combined_set(sets: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One set's metrics over the seeds: the mean of each, ``n`` summed, spreads added."""
    combined: dict[str, Any] = {}
    for metric, first in sets[0].items():
        values = [s[metric] for s in sets if isinstance(s.get(metric), int | float)]
        if metric == "n":
            combined[metric] = sum(int(s["n"]) for s in sets)
        elif isinstance(first, dict):
            combined[metric] = _combined_set([s[metric] for s in sets])
        else:
            combined[metric] = _mean(values) if values else None
    for metric in SPREAD:
        values = [float(s[metric]) for s in sets if metric in s]
        if len(values) > 1:
            combined[f"{metric}_sd"] = round(statistics.stdev(values), 4)
    return combined


def combine(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One report of several runs of :func:`~tribal_memory.bench.learn.run_learn_bench`.

    Args:
        reports: One report per split seed, same variants and options.

    Returns:
        The first report's fields, with ``seeds`` (the list), ``variants``
        ({variant: {set: metrics}}: means, ``n`` summed, ``*_sd`` spreads),
        ``feedback_coverage`` and ``after_feedback`` averaged, ``per_seed``
        ([{"seed", "recall@10_lift": {variant: {set: lift over plain}}}]) and
        the targets checked against the means.

    Raises:
        ValueError: no reports.
    """
    if not reports:
        raise ValueError("no reports to combine")
    first = reports[0]
    combined = {k: v for k, v in first.items() if k not in ("seed", "targets")}
    combined["seeds"] = [r["seed"] for r in reports]
    combined["feedback_coverage"] = _mean([r["feedback_coverage"] for r in reports])
    combined["variants"] = {
        name: {
            set_name: _combined_set([r["variants"][name][set_name] for r in reports])
            for set_name in sets
        }
        for name, sets in first["variants"].items()
    }
    after = [r["after_feedback"] for r in reports]
    combined["after_feedback"] = {
        key: _mean([a[key] for a in after if a[key] is not None])
        if any(a[key] is not None for a in after)
        else None
        for key in after[0]
    }
    combined["per_seed"] = [_lifts(r) for r in reports]
    combined["targets"] = targets(combined)
    return combined


def _lifts(report: dict[str, Any]) -> dict[str, Any]:
    """One seed's recall@10 of each variant and set minus plain's (empty without plain)."""
    variants = report["variants"]
    plain = variants.get("plain")
    lifts = {
        name: {
            set_name: round(metrics["recall@10"] - plain[set_name]["recall@10"], 4)
            for set_name, metrics in sets.items()
            if set_name != "other_agent"
        }
        for name, sets in variants.items()
        if plain is not None and name != "plain"
    }
    return {"seed": report["seed"], "recall@10_lift": lifts}
