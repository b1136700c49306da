"""What every benchmark report shares: the machine line, the JSON file, progress lines."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def machine_line() -> str:
    """The machine in one line: ``"<arch> <OS>, Python <version>"``."""
    return f"{platform.machine()} {platform.system()}, Python {platform.python_version()}"


def checkout_commit(path: Path) -> str | None:
    """The short git commit of the checkout holding the file or dir ``path``, or None."""
    directory = path if path.is_dir() else path.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def load_average() -> list[float]:
    """The machine's load average over 1, 5 and 15 minutes, rounded to two decimals."""
    return [round(x, 2) for x in os.getloadavg()]


def report_header(benchmark: str, commit_of: Path | None = None) -> dict[str, Any]:
    """The fields every benchmark script's report opens with.

    ``benchmark`` names the script; ``commit`` is the checkout holding ``commit_of``
    (None: the field is left out, as for a script comparing several checkouts).
    Returns ``{"benchmark", "started_at" (UTC, ISO 8601), "machine", ["commit"],
    "load_avg_1_5_15_at_start"}``; the caller adds ``load_avg_1_5_15_at_end``
    with :func:`load_average` when it is done.
    """
    header: dict[str, Any] = {
        "benchmark": benchmark,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_line(),
    }
    if commit_of is not None:
        header["commit"] = checkout_commit(commit_of)
    header["load_avg_1_5_15_at_start"] = load_average()
    return header


@contextlib.contextmanager
def copied_data_dir(source: Path) -> Iterator[Path]:
    """A copy of the data dir ``source`` in a temp dir, removed on exit.

    Benchmarks that search or write a kept store work on a copy so the kept one
    stays as ``bench perf --keep-data`` left it.

    Raises:
        OSError: ``source`` cannot be read or the copy cannot be written.
    """
    with tempfile.TemporaryDirectory(prefix="tribal-bench-") as tmp:
        copy = Path(tmp) / "data"
        shutil.copytree(source, copy)
        yield copy


def write_report(report: dict[str, Any], out: Path | None) -> None:
    """Write ``report`` to ``out`` as indented JSON with a final newline (None: nothing).

    Creates the parent directories.

    Raises:
        OSError: the file cannot be written.
    """
    if out is None:
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def stderr_line(line: str) -> None:
    """Print one progress line to stderr at once (the default progress log)."""
    print(line, file=sys.stderr, flush=True)
