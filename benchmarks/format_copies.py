"""Copies of a kept store's rows in other Lance file formats, each indexed afresh.

``first_ask.py --against`` compares two stores; for a comparison of file
formats alone they must hold the same rows with indexes built the same way.
This reads every row of a data dir ``bench perf --keep-data`` kept and
writes it into ``<out>/f<format>/`` per format given, with the learned
tables' SQLite file, then opens each copy as the server would and runs
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

import lancedb

from tribal_memory.store.lance_rows import TABLE
from tribal_memory.store.lance_table import recorded_model
from tribal_memory.store.lancedb import LanceMemoryStore

BATCH_ROWS = 100_000


async def copy_rows(source: Path, target: Path, file_format: str) -> None:
    """Every row of the memory table under ``source`` into a new table of ``file_format``."""
    table = await (await lancedb.connect_async(str(source))).open_table(TABLE)
    db = await lancedb.connect_async(str(target))
    copy = await db.create_table(
        TABLE,
        schema=await table.schema(),
        storage_options={"new_table_data_storage_version": file_format},
    )
    async for batch in await table.query().to_batches(max_batch_length=BATCH_ROWS):
        await copy.add(batch)


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
        asyncio.run(copy_rows(source, target / "lancedb", file_format))
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
