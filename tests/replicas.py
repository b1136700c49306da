"""Several ``tribal-memory serve`` replicas for the tests, and waiting for what they share.

Used by ``tests/test_postgres.py`` (one LanceDB directory) and
``tests/test_object_storage.py`` (one S3 bucket): replicas on one PostgreSQL
database, started at once so they race to migrate and create the table.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tribal_memory.bench.server_process import ServerProcess, tribal_server


def until(check: Callable[[], bool], bound_s: float, what: str) -> float:
    """Seconds until ``check()`` held (polled every 50 ms); fails the test past ``bound_s``."""
    started = time.monotonic()
    while True:
        if check():
            return time.monotonic() - started
        if time.monotonic() - started > bound_s:
            pytest.fail(f"{what}: not within {bound_s} s")
        time.sleep(0.05)


@contextmanager
def running_replicas(
    log_dir: Path, data_dirs: list[Path], env: Mapping[str, str]
) -> Iterator[list[httpx.Client]]:
    """One replica per data dir (logs ``replica-a.log``, ...), all with ``env``; their clients.

    The replicas are launched together, then awaited; on exit they are stopped
    and each log is checked for a clean shutdown without a traceback.
    """
    servers: list[ServerProcess] = [
        tribal_server(log_dir / f"replica-{'abcdefgh'[i]}.log", data_dir=d, env=env)
        for i, d in enumerate(data_dirs)
    ]
    clients: list[httpx.Client] = []
    try:
        for server in servers:
            server.launch()
        for server in servers:
            server.wait_ready()
        clients = [httpx.Client(base_url=s.base_url, timeout=120.0) for s in servers]
        yield clients
    finally:
        for client in clients:
            client.close()
        for server in servers:
            server.stop()
    for server in servers:
        log = server.log_text()
        assert "Traceback" not in log, log
        assert "Application shutdown complete" in log, log
