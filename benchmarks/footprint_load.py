"""The memory table's disk footprint through a bulk load, in-process and without the model.

Loads ``--rows`` memories into a LanceDB store opened with the server's
settings, the way ``POST /v1/import`` does (imports of ``--import-rows``,
written ``--batch-rows`` at a time, each import ending in ``optimize()``),
samples the data dir's size during the load, then measures it as
``bench perf`` does (one ``optimize()`` with no window for what it
supersedes) and splits it by part. The store's other settings are the
server's (``Settings``), so the load keeps superseded versions for
``TRIBAL_KEEP_VERSIONS_S``; the committed 100k figures were taken with 5 s.

The texts are ``bench perf``'s generated corpus; the vectors are random unit
vectors of the model's dimension, so no embedding is computed (a float32
vector takes the same bytes whatever its values). Latencies are not measured.

    python benchmarks/footprint_load.py --rows 100000 --out benchmarks/results/x.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from tribal_memory.base.config import Settings
from tribal_memory.base.models import Memory, memory_id_for
from tribal_memory.bench.perf_corpus import generate
from tribal_memory.bench.perf_footprint import PeakSampler, footprint_figures, peak_mb
from tribal_memory.store.lancedb import LanceMemoryStore

DIM = 384
"""The shipped model's dimension."""


def load(rows: int, import_rows: int, batch_rows: int, seed: int) -> dict[str, object]:
    """Load ``rows`` memories into a fresh data dir; the footprint figures and load time."""
    facts = generate(rows, seed)
    rng = np.random.default_rng(seed)
    now = datetime.now(UTC)
    with tempfile.TemporaryDirectory(prefix="tribal-footprint-") as tmp:
        data_dir = Path(tmp) / "data"
        settings = Settings(data_dir=data_dir)
        store = LanceMemoryStore.from_settings(settings, "random-unit-vectors", DIM)
        started = time.perf_counter()
        with PeakSampler(data_dir) as disk:
            for start in range(0, rows, import_rows):
                for first in range(start, min(rows, start + import_rows), batch_rows):
                    chunk = facts[first : min(rows, start + import_rows, first + batch_rows)]
                    memories = [
                        Memory(
                            memory_id_for(f.owner, f.content),
                            f.content,
                            f.owner,
                            "fact",
                            (),
                            None,
                            None,
                            None,
                            None,
                            now,
                            now,
                            None,
                            {},
                        )
                        for f in chunk
                    ]
                    vectors = rng.standard_normal((len(chunk), DIM)).astype(np.float32)
                    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                    store.add(memories, vectors)
                store.optimize()  # as the importer does after each import
        load_s = time.perf_counter() - started
        store.close()
        figures: dict[str, object] = {"memories": rows, "load_s": round(load_s, 1)}
        figures["data_dir_peak_mb"] = peak_mb(disk)
        figures["peak_samples"] = disk.samples
        figures.update(footprint_figures(data_dir))
    return figures


def main() -> None:
    """Parse the arguments, run the load at each size, write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000", help="comma-separated sizes")
    parser.add_argument("--import-rows", type=int, default=2000)
    parser.add_argument("--batch-rows", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    report: dict[str, object] = {
        "benchmark": "footprint_load",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_avg_1_5_15_at_start": [round(x, 2) for x in os.getloadavg()],
        "settings": {
            "import_rows": args.import_rows,
            "batch_rows": args.batch_rows,
            "vectors": f"random unit vectors, {DIM}-d float32 (no model)",
            "texts": "bench perf's generated corpus",
        },
        "sizes": {},
    }
    sizes = report["sizes"]
    assert isinstance(sizes, dict)
    for rows in (int(r) for r in args.rows.split(",")):
        sizes[str(rows)] = load(rows, args.import_rows, args.batch_rows, args.seed)
    report["load_avg_1_5_15_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["command"] = "python benchmarks/footprint_load.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
    )
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["sizes"], indent=2))


if __name__ == "__main__":
    main()
