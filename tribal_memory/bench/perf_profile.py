"""Where the time of a search goes: pyinstrument over the in-process search path.

Opens a :class:`~tribal_memory.service.memory_service.MemoryService` over a data dir the
benchmark filled, runs hybrid searches (k=10, the default learned variant,
as the server does) under pyinstrument's sampling profiler, and splits the
sampled time by the innermost part of the system each sample was in.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tribal_memory.base.config import Settings
from tribal_memory.base.errors import TribalError
from tribal_memory.bench.metrics import percentile
from tribal_memory.embeddings.base import Embedder

# (substring of a frame's file path, part) in priority order: the innermost frame
# whose path matches decides the part of its time.
_PARTS: tuple[tuple[str, str], ...] = (
    ("onnxruntime", "query embedding (ONNX, tokenizer)"),
    ("fastembed", "query embedding (ONNX, tokenizer)"),
    ("tokenizers", "query embedding (ONNX, tokenizer)"),
    ("tribal_memory/embeddings/", "query embedding (ONNX, tokenizer)"),
    ("/lancedb/", "LanceDB (vector + FTS search, Arrow)"),
    ("/lance/", "LanceDB (vector + FTS search, Arrow)"),
    ("/pyarrow/", "LanceDB (vector + FTS search, Arrow)"),
    ("tribal_memory/store/", "LanceDB (vector + FTS search, Arrow)"),
    ("/sqlalchemy/", "SQLite (learned-layer tables)"),
    ("sqlite3", "SQLite (learned-layer tables)"),
    ("tribal_memory/base/db.py", "SQLite (learned-layer tables)"),
    ("tribal_memory/learned/", "learned layer (Python)"),
    ("/nltk/", "learned layer (Python)"),
    ("tribal_memory/", "service, retrieval, fusion (Python)"),
)
_OTHER = "other"


def _part(file_path: str | None) -> str | None:
    path = (file_path or "").replace("\\", "/")
    for marker, part in _PARTS:
        if marker in path:
            return part
    return None


def _split(frame: Any, inherited: str, totals: dict[str, float]) -> None:
    part = _part(frame.file_path) or inherited
    totals[part] = totals.get(part, 0.0) + frame.total_self_time
    for child in frame.children:
        if not child.is_synthetic:  # synthetic children are already in total_self_time
            _split(child, part, totals)


def profile_search(
    settings: Settings, embedder: Embedder, queries: Sequence[str], samples: int, out: Path
) -> dict[str, Any]:
    """Profile ``samples`` in-process hybrid searches over the store ``settings`` open.

    Args:
        settings: Settings of a store filled by the benchmark (no server may be using it).
        embedder: The model of that store.
        queries: Questions, cycled through.
        samples: Searches timed without the profiler, then as many profiled
            (after a warm-up of 20).
        out: Where pyinstrument's text report goes.

    Returns:
        ``{"searches", "in_process_p50_ms", "in_process_p95_ms",
        "profiled_p50_ms", "ms_per_search": {part: ms}, "share": {part:
        fraction}, "report"}``: latencies without and with the profiler
        attached (it adds overhead), and the profiled time split by part.

    Raises:
        TribalError: pyinstrument is not installed.
    """
    try:
        from pyinstrument import Profiler
    except ImportError as exc:
        raise TribalError(
            "--profile needs pyinstrument: pip install 'tribal-memory[bench]'"
        ) from exc
    from tribal_memory.service.memory_service import MemoryService

    with MemoryService(settings, embedder=embedder) as service:
        for i in range(20):
            service.search(queries[i % len(queries)], k=10)
        plain: list[float] = []
        for i in range(samples):
            started = time.perf_counter()
            service.search(queries[i % len(queries)], k=10)
            plain.append((time.perf_counter() - started) * 1000)
        times: list[float] = []
        profiler = Profiler(interval=0.0005)
        profiler.start()
        for i in range(samples):
            started = time.perf_counter()
            service.search(queries[i % len(queries)], k=10)
            times.append((time.perf_counter() - started) * 1000)
        profiler.stop()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(profiler.output_text(unicode=False, color=False, show_all=False))
    root = profiler.last_session.root_frame() if profiler.last_session else None
    totals: dict[str, float] = {}
    if root is not None:
        _split(root, _OTHER, totals)
    whole = sum(totals.values()) or 1.0
    ordered = sorted(totals.items(), key=lambda item: -item[1])
    return {
        "searches": samples,
        "in_process_p50_ms": round(percentile(plain, 50), 2),
        "in_process_p95_ms": round(percentile(plain, 95), 2),
        "profiled_p50_ms": round(percentile(times, 50), 2),
        "ms_per_search": {part: round(s * 1000 / samples, 2) for part, s in ordered},
        "share": {part: round(s / whole, 3) for part, s in ordered},
        "report": str(out),
    }
