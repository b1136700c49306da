"""What every benchmark report shares: the machine line, the JSON file, progress lines."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any


def machine_line() -> str:
    """The machine in one line: ``"<arch> <OS>, Python <version>"``."""
    return f"{platform.machine()} {platform.system()}, Python {platform.python_version()}"


def checkout_commit(path: Path) -> str | None:
    """The short git commit of the checkout holding ``path``, or None outside one."""
    try:
        out = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


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
