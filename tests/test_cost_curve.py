"""benchmarks/cost_curve.py: the cost curve table and plot from `bench perf` reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "cost_curve.py"


def _report(path: Path, sizes: dict[str, dict[str, float]]) -> Path:
    path.write_text(json.dumps({"benchmark": "perf", "sizes": sizes}))
    return path


def test_the_table_has_a_row_per_size_and_the_plot_is_a_png(tmp_path: Path) -> None:
    small = _report(
        tmp_path / "a.json",
        {"10000": {"search_p50_ms": 20.0, "search_p95_ms": 30.0, "rss_peak_mb": 700.0}},
    )
    # A later report replaces a size an earlier one measured, and adds its own.
    large = _report(
        tmp_path / "b.json",
        {
            "10000": {"search_p50_ms": 18.0, "search_p95_ms": 25.0},
            "1000000": {"search_p50_ms": 35.0, "search_p95_ms": 70.0, "data_dir_mb": 3200.0},
        },
    )
    png = tmp_path / "curve.png"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(small), str(large), "--png", str(png)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 1")]
    assert [row.split("|")[1].strip() for row in rows] == ["10,000", "1,000,000"]
    assert "| 18.0 | 25.0 |" in rows[0] and "`b.json`" in rows[0]
    assert "3,200" in rows[1]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_file_that_is_not_a_perf_report_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "x.json"
    other.write_text(json.dumps({"benchmark": "locomo"}))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(other)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "not a bench perf report" in done.stderr and "Traceback" not in done.stderr
