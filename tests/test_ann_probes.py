"""How many IVF partitions a vector search probes as the index grows (``probes_for``)."""

from __future__ import annotations

from tribal_memory.store.lance_index import PROBES_BASE_ROWS, probes_for


def test_small_and_mid_stores_probe_the_setting() -> None:
    for rows in (0, 5_000, 100_000, PROBES_BASE_ROWS):
        assert probes_for(32, rows) == 32


def test_larger_indexes_probe_more_and_never_fewer() -> None:
    counts = [probes_for(32, rows) for rows in (300_000, 1_000_000, 4_000_000)]
    assert counts == sorted(counts) and counts[0] > 32
    assert counts[1] == 64  # four times the base: twice the probes
    assert probes_for(1, 4 * PROBES_BASE_ROWS) == 2  # the rule scales any setting
