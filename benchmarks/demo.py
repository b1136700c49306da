"""The quick-start workload: start a real server, load a real conversation over
HTTP, ask its questions, and report what came back.

Usage: ``python benchmarks/demo.py [--data FILE] [--questions N] [--keep-serving]``

With the LoCoMo development file (``../shared/data/locomo-dev.json`` by default,
or ``--data``) it captures the first conversation (one memory per dialog turn,
dated) in batches through ``POST /v1/memories/batch`` and asks that
conversation's questions through ``POST /v1/search``, counting a question as
answered when one of its evidence turns is in the top 5. Without the file it
captures the sections of this repository's README and asks about them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tribal_memory.bench.metrics import percentile
from tribal_memory.bench.server_process import ServerStartError, tribal_server
from tribal_memory.documents.locomo import load_locomo

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"


def _readme_workload() -> tuple[list[dict[str, Any]], list[tuple[str, set[str]]]]:
    sections = [s.strip() for s in (ROOT / "README.md").read_text().split("\n## ") if s.strip()]
    memories = [{"content": s[:4000], "owner": "demo", "kind": "chunk"} for s in sections]
    questions = [("How do I run the tests?", set()), ("Which settings are there?", set())]
    return memories, questions


def _locomo_workload(path: Path) -> tuple[list[dict[str, Any]], list[tuple[str, set[str]]]]:
    sample = load_locomo(path)[0]
    memories = [
        {
            "content": m.content,
            "owner": m.owner,
            "source": m.source,
            "event_time": m.event_time.isoformat() if m.event_time else None,
            "metadata": m.metadata,
        }
        for m in sample.memories
    ]
    questions = [
        (q.question, set(q.evidence)) for q in sample.questions if q.category != 5 and q.evidence
    ]
    return memories, questions


def run(data: Path, n_questions: int, keep_serving: bool) -> None:
    """Start the server, run the workload, print a report, stop (unless keep_serving)."""
    workload = _locomo_workload(data) if data.is_file() else _readme_workload()
    memories, questions = workload
    source = data.name if data.is_file() else "README.md (LoCoMo file not found)"
    data_dir = Path(tempfile.mkdtemp(prefix="tribal-demo-"))
    port = int(os.environ["TRIBAL_PORT"]) if "TRIBAL_PORT" in os.environ else None
    log_path = data_dir / "server.log"
    server = tribal_server(log_path, data_dir=data_dir, port=port, startup_timeout_s=90)
    base = server.base_url
    try:
        with httpx.Client(base_url=base, timeout=120) as client:
            try:
                server.start()
            except ServerStartError as exc:
                raise SystemExit(f"server did not start: {exc.detail}") from exc
            print(f"\nserver up at {base}; data dir {data_dir}; server log {log_path}")
            print(f"workload: {source}")
            started = time.perf_counter()
            for i in range(0, len(memories), 64):
                client.post(
                    "/v1/memories/batch", json={"memories": memories[i : i + 64]}
                ).raise_for_status()
            seconds = time.perf_counter() - started
            print(
                f"captured {len(memories)} memories in {seconds:.1f} s "
                f"({len(memories) / seconds:.0f}/s)"
            )
            owner = memories[0]["owner"]
            latencies: list[float] = []
            answered = 0
            asked = questions[:n_questions]
            for question, evidence in asked:
                t0 = time.perf_counter()
                response = client.post(
                    "/v1/search", json={"query": question, "k": 5, "owner": owner}
                )
                latencies.append((time.perf_counter() - t0) * 1000)
                response.raise_for_status()
                hits = response.json()["hits"]
                found = [h for h in hits if h["metadata"].get("dia_id") in evidence]
                answered += bool(found)
                top = " ".join(hits[0]["content"].split()) if hits else "(no hit)"
                mark = ("+" if found else "-") if evidence else "?"
                print(f" {mark} {question}\n     -> {top[:110]}")
            if any(evidence for _, evidence in asked):
                print(f"\nevidence turn in the top 5 for {answered}/{len(asked)} questions")
            print(
                f"search over HTTP: p50 {percentile(latencies, 50):.1f} ms, "
                f"p95 {percentile(latencies, 95):.1f} ms"
            )
            print("stats:", client.get("/v1/stats").json())
            if keep_serving:
                print(f"\nserving at {base} (Swagger UI at {base}/schema/swagger); Ctrl-C stops")
                server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--keep-serving", action="store_true")
    args = parser.parse_args()
    run(args.data, args.questions, args.keep_serving)


if __name__ == "__main__":
    main()
