"""The cost curve of one store as it grows: ``bench perf`` figures by size, a table and a plot.

Reads ``bench perf`` reports (a later file's size replaces an earlier one's),
prints a Markdown table of search p50/p95 (ms, lower is better), the 1%
owner-filtered p50, capture (memories/s, higher is better), ingest
(memories/s), the server's peak RSS (MiB) and the data dir after
``optimize()`` (MiB) per size, and draws the same as a PNG with matplotlib
(log-scaled size axis; a figure a report lacks is left out).

    python benchmarks/cost_curve.py benchmarks/results/perf-10k-quiet.json \
        benchmarks/results/perf-100k-quiet.json --png docs/assets/cost-curve.png
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

COLUMNS: tuple[tuple[str, str], ...] = (
    ("search_p50_ms", "search p50 ms"),
    ("search_p95_ms", "search p95 ms"),
    ("filtered_1pct_p50_ms", "1% filtered p50 ms"),
    ("capture_per_s", "capture /s"),
    ("ingest_per_s", "ingest /s"),
    ("rss_peak_mb", "peak RSS MiB"),
    ("data_dir_mb", "data dir MiB"),
)
"""(report field, column title) of the table, in order."""


def curve(reports: Sequence[Path]) -> dict[int, dict[str, Any]]:
    """Figures by store size (memories), with ``source`` (the report's file name) added.

    Raises:
        ValueError: a file is not a ``bench perf`` report (not JSON, or no ``sizes``).
        OSError: a file cannot be read.
    """
    sizes: dict[int, dict[str, Any]] = {}
    for path in reports:
        report = json.loads(path.read_text())
        if not isinstance(report, dict) or not isinstance(report.get("sizes"), dict):
            raise ValueError(f"{path} is not a bench perf report (no sizes)")
        for size, figures in report["sizes"].items():
            sizes[int(size)] = {**figures, "source": path.name}
    return dict(sorted(sizes.items()))


def markdown(points: dict[int, dict[str, Any]]) -> str:
    """The table: one row per size, ``-`` where a report lacks a figure."""
    head = "| memories | " + " | ".join(title for _, title in COLUMNS) + " | result file |"
    rule = "|---:|" + "---:|" * len(COLUMNS) + "---|"
    rows = [head, rule]
    for size, figures in points.items():
        cells = [_cell(figures.get(field)) for field, _ in COLUMNS]
        rows.append(f"| {size:,} | " + " | ".join(cells) + f" | `{figures['source']}` |")
    return "\n".join(rows)


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def plot(points: dict[int, dict[str, Any]], out: Path) -> None:
    """Draw latency, capture, memory and disk against size (log x) into ``out`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: write the file only
    import matplotlib.pyplot as plt

    panels = (
        ("search latency (ms)", ("search_p50_ms", "search_p95_ms", "filtered_1pct_p50_ms")),
        ("throughput (memories/s)", ("capture_per_s", "ingest_per_s")),
        ("server peak RSS (MiB)", ("rss_peak_mb",)),
        ("data dir after optimize() (MiB)", ("data_dir_mb",)),
    )
    titles = dict(COLUMNS)
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), constrained_layout=True)
    for ax, (title, fields) in zip(axes.flat, panels, strict=True):
        for field in fields:
            xs = [n for n, f in points.items() if f.get(field) is not None]
            ax.plot(xs, [points[n][field] for n in xs], marker="o", label=titles[field])
        ax.set_xscale("log")
        ax.set_xlabel("memories in the store")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("tribal-memory cost curve (bench perf, 2 cores)")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main() -> None:
    """Parse the arguments, print the table, draw the plot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path, help="bench perf reports (JSON)")
    parser.add_argument("--png", type=Path, help="write the plot here")
    args = parser.parse_args()
    try:
        points = curve(args.reports)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    print(markdown(points))
    if args.png is not None:
        try:
            plot(points, args.png)
        except ImportError:
            parser.error("--png needs matplotlib: pip install -e '.[bench]'")


if __name__ == "__main__":
    main()
