"""Locust scenario of ``bench perf``: users sending hybrid searches back to back.

Run by :func:`tribal_memory.bench.perf_server.run_locust` in its own process
(locust patches the standard library with gevent; never import this module
from tribal_memory). The questions come from the JSON list in the file named
by ``TRIBAL_PERF_QUERIES``.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from locust import HttpUser, constant, task

_QUERIES: list[str] = json.loads(Path(os.environ["TRIBAL_PERF_QUERIES"]).read_text())


class Searcher(HttpUser):
    """One client: a random question, hybrid search, k=10, no pause between requests."""

    wait_time = constant(0)

    @task
    def search(self) -> None:
        """``POST /v1/search``; any status but 200 counts as a failure."""
        body = {"query": random.choice(_QUERIES), "k": 10}
        self.client.post("/v1/search", json=body, name="/v1/search")
