"""Copies of a kept store's rows in other Lance file formats, each indexed afresh.

``first_ask.py --against`` compares two stores; for a comparison of file
formats alone they must hold the same rows with indexes built the same way.
This copies the memory table of a data dir ``bench perf --keep-data`` kept
into ``<out>/f<format>/`` per format given, as a backup does
(``lance_upkeep.copy_table``), with the learned tables' SQLite file, then
opens each copy as the server would and runs
``optimize()`` twice, so each has one data file and a one-segment IVF index
trained on all of its rows.

    python benchmarks/format_copies.py /tmp/kept1m/data-1000000 /tmp/ab 2.2 2.1
    python benchmarks/first_ask.py /tmp/ab/f2.2 --size 1000000 --against /tmp/ab/f2.1 \\
        --out benchmarks/results/perf-1m-file-format.json
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import time
from pathlib import Path

from tribal_memory.store.lance_table import recorded_model
from tribal_memory.store.lance_upkeep import copy_table
from tribal_memory.store.lancedb import LanceMemoryStore


def main() -> None:
    """Parse the arguments, copy and index each format in turn."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path, help="a data dir bench perf --keep-data kept")
    parser.add_argument("out", type=Path, help="where the copies go (f<format>/ each)")
    parser.add_argument("formats", nargs="+", help="Lance file formats, e.g. 2.1 2.2")
    args = parser.parse_args()
    source = args.data_dir / "lancedb"
    recorded = asyncio.run(recorded_model(str(source)))
    if recorded is None:
        parser.error(f"{source} holds no memory table")
    model, dim = recorded
    for file_format in args.formats:
        target = args.out / f"f{file_format}"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        shutil.copy(args.data_dir / "tribal.sqlite3", target / "tribal.sqlite3")
        started = time.perf_counter()
        copy_table(str(source), str(target / "lancedb"), file_format=file_format)
        copied = time.perf_counter() - started
        store = LanceMemoryStore(str(target / "lancedb"), model, dim, keep_versions_s=0)
        for _ in range(2):
            store.optimize()
            store.wait_for_maintenance()
        print(
            f"{file_format}: copied in {copied:.0f} s, indexed in "
            f"{time.perf_counter() - started - copied:.0f} s, {store.health()}, "
            f"{store.ann_index_stats()}",
            flush=True,
        )
        store.close()


if __name__ == "__main__":
    main()
