"""Disk figures of ``bench perf``: the data dir's size, its peak while loading, bytes per memory.

:class:`PeakSampler` samples the data dir's size on a thread while the
corpus loads; :func:`footprint_figures` measures it once the run is over,
before and after one ``optimize()``, and splits the bytes per memory by what
they hold (LanceDB's table files, :func:`~tribal_memory.store.lance_footprint.table_footprint`,
and the SQLite database). Sizes in MiB (``_mb``) or bytes; lower is smaller.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from tribal_memory.base.config import Settings
from tribal_memory.store.lance_footprint import TableFootprint, dir_bytes
from tribal_memory.store.lancedb import LanceMemoryStore

SAMPLE_S = 0.25
"""Seconds between two samples of the data dir's size while loading."""
MIB = 1024**2
_EMPTY = TableFootprint(0, 0, 0, 0, 0, 0, 0)


class PeakSampler:
    """The largest size of a directory seen while the ``with`` block runs, sampled on a thread.

    Args:
        path: The directory (a missing one counts as 0 bytes).
        interval_s: Seconds between samples; a peak shorter than that can be missed.

    Attributes:
        peak_bytes: The largest size seen (bytes), also sampled on entry and exit.
        samples: How many samples were taken.
    """

    def __init__(self, path: Path, interval_s: float = SAMPLE_S) -> None:
        self._path = path
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-disk-sampler", daemon=True)
        self.peak_bytes = 0
        self.samples = 0

    def sample(self) -> None:
        """Measure the directory once and keep the peak."""
        self.peak_bytes = max(self.peak_bytes, dir_bytes(self._path))
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.sample()

    def __enter__(self) -> PeakSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def footprint_figures(data_dir: Path) -> dict[str, Any]:
    """The data dir's size after a run, before and after one ``optimize()``, per memory by part.

    Opens the stopped server's store and runs ``optimize()`` once with no
    window for superseded versions (nothing else reads the table), so what
    it supersedes goes at once: the size a server reaches on its own
    ``keep_versions_s`` after its last ``optimize()``.

    Args:
        data_dir: The server's data dir (LanceDB and SQLite inside).

    Returns:
        ``data_dir_end_mb`` (as the run left it), ``data_dir_mb`` (after
        the ``optimize()``), ``memories_stored``,
        ``table_versions_end`` and ``table_versions`` (LanceDB versions on
        disk before and after), ``table_fragments`` (after),
        ``data_dir_end_table_mb`` (the table's MiB by part as the run left it),
        ``bytes_per_memory`` (``data_dir_mb`` over the memories stored) and
        ``bytes_per_memory_breakdown``: ``vectors``, ``text``, ``fts``,
        ``ivf``, ``scalar_indexes``, ``versions`` (files only older table
        versions read), ``sqlite`` and ``other``, summing to
        ``bytes_per_memory`` up to rounding.

    Raises:
        StoreUnavailable: the store cannot be opened or optimised.
    """
    settings = Settings(data_dir=data_dir)
    end_bytes = dir_bytes(data_dir)
    store = LanceMemoryStore.open_existing(settings.lancedb_uri, keep_versions_s=0)
    if store is None:
        return {"data_dir_end_mb": round(end_bytes / MIB, 1)}
    try:
        before = store.health()
        at_end = store.footprint()
        store.optimize()
        after = store.health()
        table = store.footprint()
        rows = int(store.start_count().result())
    finally:
        store.close()
    total = dir_bytes(data_dir)
    sqlite = sum(
        p.stat().st_size
        for p in settings.data_dir.glob(f"{settings.sqlite_path.name}*")
        if p.is_file()
    )
    parts: dict[str, int] = table.as_dict() if table is not None else {}
    parts.pop("other", None)
    parts["sqlite"] = sqlite
    parts["other"] = total - sum(parts.values())
    per = max(1, rows)
    return {
        "data_dir_end_mb": round(end_bytes / MIB, 1),
        "data_dir_mb": round(total / MIB, 1),
        "memories_stored": rows,
        "table_versions_end": before["versions"],
        "table_versions": after["versions"],
        "table_fragments": after["fragments"],
        "data_dir_end_table_mb": {
            name: round(size / MIB, 1) for name, size in (at_end or _EMPTY).as_dict().items()
        },
        "bytes_per_memory": round(total / per),
        "bytes_per_memory_breakdown": {name: round(size / per) for name, size in parts.items()},
    }


def peak_mb(sampler: PeakSampler) -> float:
    """``sampler``'s peak in MiB, rounded to 0.1 (``data_dir_peak_mb``)."""
    return round(sampler.peak_bytes / MIB, 1)
