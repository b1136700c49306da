"""Locust scenarios of ``bench perf``: users sending requests back to back.

Run by :func:`tribal_memory.bench.perf_server.run_locust` in its own process
(locust patches the standard library with gevent; never import this module
from tribal_memory). The questions come from the JSON list in the file named
by ``TRIBAL_PERF_QUERIES``. Two user classes, chosen on locust's command line:

- :class:`Searcher`: hybrid searches only;
- :class:`MixedAgent`: an agent's mix, 80% searches, 10% captures of a new
  fact, 10% searches with feedback followed by the feedback itself (the
  search logs a retrieval; the feedback reports its top hit as used).
"""

from __future__ import annotations

import json
import os
import random
import uuid
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


class MixedAgent(HttpUser):
    """One agent: searches (weight 8), captures (1) and feedback (1), no pause between."""

    wait_time = constant(0)

    @task(8)
    def search(self) -> None:
        """``POST /v1/search`` of a random question."""
        body = {"query": random.choice(_QUERIES), "k": 10}
        self.client.post("/v1/search", json=body, name="/v1/search")

    @task(1)
    def capture(self) -> None:
        """``POST /v1/memories`` of a new fact (a fresh id in it makes it new)."""
        words = random.choice(_QUERIES).rstrip("?")
        content = f"Note {uuid.uuid4().hex[:12]}: {words}."
        body = {"content": content, "owner": f"agent-{random.randrange(20):02d}"}
        self.client.post("/v1/memories", json=body, name="/v1/memories")

    @task(1)
    def feedback(self) -> None:
        """A search with ``feedback: true``, then ``POST /v1/feedback`` using its top hit."""
        body = {"query": random.choice(_QUERIES), "k": 10, "feedback": True}
        with self.client.post(
            "/v1/search", json=body, name="/v1/search (feedback)", catch_response=True
        ) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}")
                return
            answer = response.json()
        used = [answer["hits"][0]["memory_id"]] if answer["hits"] else []
        report = {"retrieval_id": answer["retrieval_id"], "used_ids": used}
        self.client.post("/v1/feedback", json=report, name="/v1/feedback")
