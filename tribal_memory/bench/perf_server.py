"""Processes of ``bench perf``: the server under test and the locust load generator.

The server is a real ``python -m tribal_memory.interfaces.api.server`` process on
127.0.0.1 over its own data dir (started by :mod:`tribal_memory.bench.server_process`);
its memory is read from ``/proc`` (Linux).
Locust runs as a separate process too, so gevent never enters this one.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tribal_memory.base.errors import TribalError
from tribal_memory.bench import server_process

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
"""The locust scenario (random questions to ``POST /v1/search``)."""


class ServerProcess(server_process.ServerProcess):
    """``python -m tribal_memory.interfaces.api.server`` on a free loopback port (context manager).

    Args:
        data_dir: The server's data dir (``TRIBAL_DATA_DIR``).
        log_path: Where the server's stdout and stderr go.
        lancedb_uri: Where its LanceDB store is (``TRIBAL_LANCEDB_URI``, e.g.
            ``s3://bucket/path``); None: in ``data_dir``.
        env: More environment variables for it (settings of a variant).

    Raises:
        ServerStartError: on entry, the server exited or was not healthy within
            120 s (the detail names the log).
    """

    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        lancedb_uri: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        port = server_process.free_port()
        env = {
            **(env or {}),
            "TRIBAL_DATA_DIR": str(data_dir),
            "TRIBAL_PORT": str(port),
            "TRIBAL_HOST": server_process.LOOPBACK,
        }
        if lancedb_uri:
            env["TRIBAL_LANCEDB_URI"] = lancedb_uri
        super().__init__(
            ["-m", "tribal_memory.interfaces.api.server"], log_path=log_path, port=port, env=env
        )
        self.data_dir = data_dir

    def memory_mb(self) -> dict[str, float]:
        """Resident memory of the server from ``/proc/<pid>/status``, in MiB.

        Returns:
            ``{"rss_mb": current VmRSS, "peak_mb": VmHWM (peak RSS so far)}``;
            empty when ``/proc`` is not there (not Linux).
        """
        return read_memory_mb(self.pid)


def read_memory_mb(pid: int) -> dict[str, float]:
    """``{"rss_mb", "peak_mb"}`` of process ``pid`` (VmRSS, VmHWM), MiB; empty without /proc."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    fields = {"VmRSS": "rss_mb", "VmHWM": "peak_mb"}
    found: dict[str, float] = {}
    for line in lines:
        key, _, value = line.partition(":")
        if key in fields:
            found[fields[key]] = round(int(value.split()[0]) / 1024, 1)  # kB -> MiB
    return found


def run_locust(
    base_url: str,
    queries: Sequence[str],
    work_dir: Path,
    *,
    clients: int,
    seconds: int,
    user: str = "Searcher",
) -> dict[str, Any]:
    """Run locust headless against ``base_url`` with ``clients`` users for ``seconds``.

    Each user sends random ``queries`` back to back, over its own keep-alive
    connection: ``Searcher`` to ``POST /v1/search`` (hybrid, k=10),
    ``MixedAgent`` an agent's mix of searches, captures and feedback (see
    ``locustfile.py``).

    Returns:
        ``{"clients", "seconds", "requests", "rps", "p50_ms", "p99_ms",
        "errors"}``: requests per second and latency percentiles (ms, as locust
        rounds them) over the whole run and every kind of request, ``errors``
        the failed requests.

    Raises:
        TribalError: locust failed to run or wrote no statistics.
    """
    queries_path = work_dir / "locust-queries.json"
    queries_path.write_text(json.dumps(list(queries)))
    prefix = work_dir / f"locust-{user}-{clients}"
    command = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        user,
        "--headless",
        "--only-summary",
        "-u",
        str(clients),
        "-r",
        str(clients),
        "-t",
        f"{seconds}s",
        "--host",
        base_url,
        "--csv",
        str(prefix),
    ]
    env = {**os.environ, "TRIBAL_PERF_QUERIES": str(queries_path)}
    log_path = work_dir / f"locust-{user}-{clients}.log"
    with log_path.open("wb") as log:
        done = subprocess.run(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=seconds + 120
        )
    stats = Path(f"{prefix}_stats.csv")
    if not stats.is_file():
        raise TribalError(f"locust exited with code {done.returncode}; see {log_path}")
    with stats.open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row.get("Name") == "Aggregated"]
    if not rows:
        raise TribalError(f"locust wrote no aggregated statistics; see {log_path}")
    row = rows[0]
    return {
        "clients": clients,
        "seconds": seconds,
        "requests": int(row["Request Count"]),
        "rps": round(float(row["Requests/s"]), 1),
        "p50_ms": float(row["50%"]),
        "p99_ms": float(row["99%"]),
        "errors": int(row["Failure Count"]),
    }
