"""What the rows outside the indexes cost the searches that scan them, and when to fold them in.

Rows written since the last ``optimize()`` are in no index: every LanceDB
query over the table reads and scores them in full (BM25 tokenises their
text per query), so each search pays for them until they are folded in.
Folding costs one ``optimize()`` run. :class:`ScanCost` keeps the running
estimate of what those rows have cost the searches so far and says when it
has reached the price of a run: the rent-or-buy rule of the ski-rental
problem (Karlin, Manasse, Rudolph and Sleator, "Competitive snoopy caching",
Algorithmica 1988), which keeps the total within a constant factor of the
best choice made knowing the searches to come. A store nobody searches is
never folded by it; a busy one is folded within seconds of a burst of
captures.
"""

from __future__ import annotations

import threading

UNINDEXED_ROW_SCAN_S = 2e-6
"""Seconds one row outside the indexes adds to one LanceDB query that scans the table.

Measured in-process on ``bench perf``'s 100k corpus with 2,048 rows just
captured in 8 batches (280 new questions, p50): the BM25 query took 5.8-6.0
ms against 1.1-1.2 ms with ``fast_search()``, which leaves those rows out,
and the vector query on the IVF index 7.5-8.0 ms against 4.5-4.9: 2.3 and
1.5 microseconds a row. Over HTTP, before this rule folded them in, searches
in the 25 s after such a burst took 19.1-21.9 ms p50 against 13.4-15.0 before
it (``benchmarks/after_capture.py``, ``after-capture-100k-before*.json``).
"""
FOLD_MIN_S = 1.0
"""Least search time (seconds) the unindexed rows must cost before that alone calls for a fold.

A store that has not run ``optimize()`` yet in this process has no run
duration to compare with; this bounds how often a fold is asked for then.
"""


class ScanCost:
    """The search time the rows outside the indexes have cost since it was last reset (an estimate).

    Thread-safe: searches on any thread add to it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spent_s = 0.0

    def add(self, row_scans: int, price_s: float) -> bool:
        """Count ``row_scans`` (unindexed rows x queries that read them); True once a fold is paid.

        Args:
            row_scans: Rows outside the indexes times the LanceDB queries
                that read them (a hybrid search over a large table is two).
            price_s: What a fold costs, in seconds of search time (at least
                :data:`FOLD_MIN_S` is used).

        Returns:
            True once the estimate reaches the price: the sum starts again
            from zero, so the next True comes only after as much more search
            time was spent. False otherwise, and for ``row_scans`` <= 0.
        """
        if row_scans <= 0:
            return False
        with self._lock:
            self._spent_s += row_scans * UNINDEXED_ROW_SCAN_S
            if self._spent_s < max(FOLD_MIN_S, price_s):
                return False
            self._spent_s = 0.0
            return True

    def reset(self) -> None:
        """Start again from zero (the rows were folded in)."""
        with self._lock:
            self._spent_s = 0.0
