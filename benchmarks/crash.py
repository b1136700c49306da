"""Crash test: kill -9 a real server during a batch-capture load, restart, count losses.

Each round starts ``tribal-memory serve`` (127.0.0.1, a free port, one temp
data dir kept across rounds), drives ``POST /v1/memories/batch`` from client
threads while another thread searches with feedback and relates memories
(so the learned tables and relations have rows), and sends SIGKILL at a
random moment. A write counts as acknowledged once its 2xx response arrived.
Before the next round the store is opened in-process and checked:

- every acknowledged memory id is readable, and a sample of them (all of the
  last round, up to ``--search-sample``) is found by searching its own text;
- :func:`tribal_memory.ops.maintenance.check_consistency` passes (unique ids, no
  relation, cache entry, weight or anchor pointing at a missing memory);
- the store opened without repair (a failed open or check counts as a
  restart needing repair; ``check --repair`` is then run so the test goes on).

With ``--maintenance`` the server makes its automatic ``optimize()`` due after
every write (``TRIBAL_OPTIMIZE_EVERY_ROWS=1``), so store maintenance (compaction,
index update, version cleanup) runs back to back on its background thread and
most kills land in the middle of one; the server log says when each run
started and finished, and ``kills_during_maintenance`` counts the rounds whose
last run had not finished when the server was killed.

Usage::

    python benchmarks/crash.py --kills 20 --out benchmarks/results/crash.json

Exit status 0 when no acknowledged write was lost and no restart needed repair.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import TribalError
from tribal_memory.bench.server_process import ServerProcess, ServerStartError, tribal_server
from tribal_memory.embeddings.base import Embedder
from tribal_memory.embeddings.fastembed import FastEmbedEmbedder
from tribal_memory.service.memory_service import MemoryService

STARTUP_TIMEOUT_S = 90.0
WORDS = (
    *("amber", "basalt", "cobalt", "dune", "ember", "fjord", "granite", "harbor", "indigo"),
    *("juniper", "kelp", "lagoon", "meadow", "nectar", "obsidian", "prairie", "quartz"),
    *("reef", "sierra", "tundra", "umber", "valley", "willow", "xenon", "yarrow", "zephyr"),
)


@dataclass
class Report:
    """What ``crash.json`` holds (counts of writes are memories, not requests)."""

    kills: int = 0
    acknowledged_writes: int = 0
    lost_acknowledged_writes: int = 0
    searched: int = 0
    not_found_by_search: int = 0
    restarts_needing_repair: int = 0
    inconsistent_checks: int = 0
    kills_during_maintenance: int = 0
    feedback_calls: int = 0
    relations: int = 0
    seconds: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


MAINTENANCE_ENV = {
    "TRIBAL_OPTIMIZE_EVERY_ROWS": "1",
    "TRIBAL_OPTIMIZE_GROWTH": "0.000001",
    "TRIBAL_KEEP_VERSIONS_S": "0",
}
"""Server settings of ``--maintenance``: the automatic ``optimize()`` is due after every write,
and with no version window kept it runs back to back (it otherwise waits for the window)."""


def _start(data_dir: Path, log: Path, *, maintenance: bool = False) -> ServerProcess:
    """``tribal-memory serve`` over ``data_dir`` on a free loopback port, healthy (or raises)."""
    env = {"TRIBAL_AUTH": "off", **(MAINTENANCE_ENV if maintenance else {})}
    server = tribal_server(
        log,
        data_dir=data_dir,
        env=env,
        startup_timeout_s=STARTUP_TIMEOUT_S,
        append_log=True,
    )
    return server.start()


class Load:
    """Client threads writing batches, plus one thread searching, giving feedback, relating."""

    def __init__(self, base: str, round_no: int, clients: int, batch: int, seed: int) -> None:
        self.base = base
        self.round_no = round_no
        self.clients = clients
        self.batch = batch
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: dict[str, str] = {}  # memory id -> content
        self.first_ack = threading.Event()
        self.feedback_calls = 0
        self.relations = 0
        self.server_errors: list[str] = []

    def _content(self, client: int, seq: int, item: int) -> str:
        rng = random.Random(f"{self.round_no}-{client}-{seq}-{item}")
        words = " ".join(rng.choice(WORDS) for _ in range(6))
        return f"round {self.round_no} client {client} batch {seq} item {item}: {words}"

    def writer(self, client: int) -> None:
        with httpx.Client(base_url=self.base, timeout=30.0) as http:
            seq = 0
            while not self.stop.is_set():
                contents = [self._content(client, seq, i) for i in range(self.batch)]
                body = {"memories": [{"content": c, "owner": f"agent-{client}"} for c in contents]}
                try:
                    response = http.post("/v1/memories/batch", json=body)
                except httpx.TransportError:
                    return  # the server is gone: the batch was not acknowledged
                if response.status_code >= 500:
                    self.server_errors.append(f"{response.status_code} {response.text[:200]}")
                if 200 <= response.status_code < 300:
                    results = response.json()["results"]
                    with self.lock:
                        for content, result in zip(contents, results, strict=True):
                            self.acked[result["memory"]["memory_id"]] = content
                    self.first_ack.set()
                seq += 1

    def learner(self) -> None:
        with httpx.Client(base_url=self.base, timeout=30.0) as http:
            while not self.stop.is_set():
                with self.lock:
                    known = list(self.acked.items())
                if len(known) < 2:
                    time.sleep(0.05)
                    continue
                (a, text), (b, _) = self.rng.sample(known, 2)
                try:
                    found = http.post("/v1/search", json={"query": text, "k": 3, "feedback": True})
                    if found.status_code == 200 and found.json()["hits"]:
                        body = found.json()
                        used = [body["hits"][0]["memory_id"]]
                        answer = http.post(
                            "/v1/feedback",
                            json={"retrieval_id": body["retrieval_id"], "used_ids": used},
                        )
                        self.feedback_calls += answer.status_code == 200
                    related = http.post(
                        "/v1/relations", json={"source_id": a, "target_id": b, "type": "near"}
                    )
                    self.relations += 200 <= related.status_code < 300
                    for response in (found, related):
                        if response.status_code >= 500:
                            self.server_errors.append(f"{response.status_code} {response.text}")
                except httpx.TransportError:
                    return


def _verify(
    settings: Settings,
    embedder: Embedder,
    acked: dict[str, str],
    recent: dict[str, str],
    sample: int,
    report: Report,
    rng: random.Random,
) -> None:
    """Open the store (no server running) and check every acknowledged id and consistency."""
    try:
        service = MemoryService(settings, embedder=embedder)
    except TribalError as exc:
        report.restarts_needing_repair += 1
        report.problems.append(f"store did not open: {exc.detail}")
        return
    with service:
        found = service.get_many(list(acked))
        lost = [i for i in acked if i not in found]
        report.lost_acknowledged_writes = len(lost)
        if lost:
            report.problems.append(f"lost acknowledged ids (first 5): {lost[:5]}")
        for memory_id in rng.sample(sorted(recent), min(sample, len(recent))):
            report.searched += 1
            hits = service.search(recent[memory_id], k=5, learned=None).hits
            if memory_id not in {hit.memory.memory_id for hit in hits}:
                report.not_found_by_search += 1
                report.problems.append(f"{memory_id} not found by searching its own text")
        consistency = service.check_consistency()
        if not consistency.ok:
            report.inconsistent_checks += 1
            report.restarts_needing_repair += 1
            report.problems.append(f"inconsistent: {consistency.as_dict()}")
            service.check_consistency(repair=True)


def _maintenance_unfinished(log_text: str) -> bool:
    """Whether the last store maintenance run in ``log_text`` (one round's log) never finished."""
    started = log_text.rfind("store maintenance started")
    return started >= 0 and log_text.find("store maintenance finished", started) < 0


def run(
    kills: int,
    *,
    clients: int = 3,
    batch: int = 8,
    min_s: float = 0.3,
    max_s: float = 2.5,
    search_sample: int = 20,
    seed: int = 7,
    data_dir: Path | None = None,
    embedder: Embedder | None = None,
    maintenance: bool = False,
) -> Report:
    """Run ``kills`` kill -9 rounds against one data dir and return the report.

    Args:
        kills: Rounds; each ends with SIGKILL at a uniform random time in
            [min_s, max_s] seconds after the first acknowledged batch.
        clients: Writer threads, each posting ``batch`` memories per request.
        search_sample: Acknowledged memories of each round searched for by their text.
        seed: Seeds the kill times, the sampled searches and the learner.
        data_dir: Where the store lives (default: a temp dir, removed afterwards).
        embedder: Model for the in-process checks (default: the packaged one).
        maintenance: Make store maintenance due after every write (see the module doc).
    """
    rng = random.Random(seed)
    embedder = embedder or FastEmbedEmbedder()
    report = Report(
        settings={
            "kills": kills,
            "clients": clients,
            "batch": batch,
            "kill_window_s": [min_s, max_s],
            "server_env": MAINTENANCE_ENV if maintenance else {},
        }
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tribal-crash-") as tmp:
        root = data_dir or Path(tmp) / "data"
        settings = Settings(data_dir=root)
        log = Path(tmp) / "server.log"
        acked: dict[str, str] = {}
        for round_no in range(kills):
            log_start = log.stat().st_size if log.exists() else 0
            try:
                server = _start(root, log, maintenance=maintenance)
            except ServerStartError as exc:
                report.restarts_needing_repair += 1
                report.problems.append(f"round {round_no}: {exc}: {log.read_text()[-500:]}")
                break
            load = Load(server.base_url, round_no, clients, batch, seed + round_no)
            threads = [threading.Thread(target=load.writer, args=(c,)) for c in range(clients)]
            threads.append(threading.Thread(target=load.learner))
            for thread in threads:
                thread.start()
            load.first_ack.wait(timeout=60)
            time.sleep(rng.uniform(min_s, max_s))
            server.kill()
            load.stop.set()
            for thread in threads:
                thread.join(timeout=60)
            report.kills += 1
            with log.open("rb") as handle:
                handle.seek(log_start)
                round_log = handle.read().decode(errors="replace")
            report.kills_during_maintenance += _maintenance_unfinished(round_log)
            report.feedback_calls += load.feedback_calls
            report.relations += load.relations
            report.problems.extend(load.server_errors)
            acked.update(load.acked)
            report.acknowledged_writes = len(acked)
            _verify(settings, embedder, acked, load.acked, search_sample, report, rng)
    report.seconds = round(time.monotonic() - started, 1)
    return report


def main() -> None:
    """Command line: run the rounds, print the JSON report, write it with ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--maintenance", action="store_true", help="make store maintenance due after every write"
    )
    args = parser.parse_args()
    report = run(
        args.kills,
        clients=args.clients,
        batch=args.batch,
        seed=args.seed,
        maintenance=args.maintenance,
    )
    text = json.dumps(asdict(report), indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    failed = report.lost_acknowledged_writes or report.restarts_needing_repair
    sys.exit(1 if failed or report.kills < args.kills else 0)


if __name__ == "__main__":
    main()
