"""Concurrent writes of one memory, as random interleavings over HTTP (issue 26, item 1).

Hypothesis draws a handful of writes aimed at one memory: content and tag
edits, a delete, captures of texts an edit may also write, an import of the
memory as first exported. They start together on threads. Afterwards every
stored memory must be consistent (its id is capture's id of its owner and
content, its vector the embedding of its content), and the answers and the
final store must be those of the writes applied one at a time in some order
(linearisable): no answer of 200 describes a state that was never stored,
and no change answered 200 is lost.
"""

from __future__ import annotations

import itertools
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient
from local import LOCAL_URL

from tribal_memory.base.config import Settings
from tribal_memory.base.models import SearchFilters, memory_id_for
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.interfaces.api import create_app

ORIGINAL = "The deploy freeze starts on Friday"
TEXTS = [f"The deploy freeze starts on {day}" for day in ("Monday", "Tuesday", "Wednesday")]

Tags = tuple[str, ...]
Answer = tuple[int, tuple[str, Tags] | None]
"""A write's status and the (content, tags) its answer described (None: none)."""


class _Model:
    """The store as the writes change it one at a time: the original memory and the others."""

    def __init__(self) -> None:
        self.original: Tags | None = ()  # the tags of the memory at the original id
        self.others: dict[str, Tags] = {}  # content -> tags of memories at other ids

    def apply(self, kind: str, n: int) -> Answer:
        if kind == "capture":
            text = TEXTS[n]
            if text in self.others:
                return 200, (text, self.others[text])
            self.others[text] = ()
            return 201, (text, ())
        if kind == "import":
            if self.original is None:
                self.original = ()
            return 200, None
        if self.original is None:
            return 404, None
        if kind == "delete":
            self.original = None
            return 204, None
        if kind == "tags":
            self.original = (f"tag-{n}",)
            return 200, (ORIGINAL, self.original)
        if TEXTS[n] in self.others:
            return 409, None
        self.others[TEXTS[n]], moved = self.original, (TEXTS[n], self.original)
        self.original = None
        return 200, moved

    def state(self) -> set[tuple[str, Tags]]:
        stored = set(self.others.items())
        return stored | ({(ORIGINAL, self.original)} if self.original is not None else set())


def _linearisable(
    writes: Sequence[tuple[str, int]], answers: Sequence[Answer], final: set[tuple[str, Tags]]
) -> bool:
    """Whether some order of ``writes`` gives exactly ``answers`` and ``final``."""
    for order in itertools.permutations(range(len(writes))):
        model = _Model()
        if all(model.apply(*writes[i]) == answers[i] for i in order) and model.state() == final:
            return True
    return False


write = st.one_of(
    st.tuples(st.just("content"), st.integers(0, len(TEXTS) - 1)),
    st.tuples(st.just("tags"), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.just(0)),
    st.tuples(st.just("capture"), st.integers(0, len(TEXTS) - 1)),
    st.tuples(st.just("import"), st.just(0)),
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(writes=st.lists(write, min_size=2, max_size=6))
def test_interleaved_writes_leave_every_memory_consistent(
    embedder: FastEmbedEmbedder, writes: list[tuple[str, int]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings_ = Settings(data_dir=Path(tmp) / "data")
        with TestClient(base_url=LOCAL_URL, app=create_app(settings_, embedder=embedder)) as client:
            first = client.post("/v1/memories", json={"content": ORIGINAL}).json()["memory"]
            exported = client.get("/v1/export").content
            url = f"/v1/memories/{first['memory_id']}"
            answers: list[Answer] = [(0, None)] * len(writes)
            barrier = threading.Barrier(len(writes))

            def run(i: int, kind: str, n: int) -> None:
                barrier.wait()
                if kind == "content":
                    response = client.patch(url, json={"content": TEXTS[n]})
                elif kind == "tags":
                    response = client.patch(url, json={"tags": [f"tag-{n}"]})
                elif kind == "delete":
                    response = client.delete(url)
                elif kind == "capture":
                    response = client.post("/v1/memories", json={"content": TEXTS[n]})
                else:
                    headers = {"content-type": "application/x-ndjson"}
                    response = client.post("/v1/import", content=exported, headers=headers)
                assert response.status_code < 500, response.text
                body: dict[str, Any] = response.json() if response.content else {}
                memory = body.get("memory", body)
                described = (memory["content"], tuple(memory["tags"])) if "tags" in memory else None
                answers[i] = (response.status_code, described)

            threads = [threading.Thread(target=run, args=(i, *w)) for i, w in enumerate(writes)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

            stored = client.get("/v1/memories").json()["memories"]
            service = client.app.state["service"]
            final = {(m["content"], tuple(m["tags"])) for m in stored}
            assert len(final) == len(stored), stored
            assert _linearisable(writes, answers, final), (writes, answers, final)
            for memory in stored:
                assert memory["memory_id"] == memory_id_for(memory["owner"], memory["content"])
                expected = embedder.embed(memory["content"])
                (hit,) = service.store.score_ids(expected, [memory["memory_id"]], SearchFilters())
                assert hit.score > 0.999, (memory, writes)
