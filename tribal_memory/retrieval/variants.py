"""A/B variants: which retrieval an owner gets, ``learned`` or ``baseline`` (DESIGN §4).

An owner may be pinned to a variant (``owner_variants`` table); an owner with
no pin gets the ``default_variant`` setting. The benchmark harness and
``tribal-memory ab`` compare the two on the same store.
"""

from __future__ import annotations

import threading
import time

from sqlalchemy import delete

from tribal_memory.base.config import Settings
from tribal_memory.base.db import Database
from tribal_memory.base.results import Variant
from tribal_memory.base.sql import upsert
from tribal_memory.base.tables import OwnerVariantRow, utcnow


class VariantPins:
    """Owners' variant pins, read through a short-lived in-process memory.

    Args:
        settings: ``default_variant`` and ``read_consistency_s`` are used.
        db: The SQL database holding the pins.
    """

    def __init__(self, settings: Settings, db: Database) -> None:
        self._settings = settings
        self._db = db
        self._lock = threading.Lock()
        self._known: dict[str, tuple[Variant, float]] = {}
        """owner -> (variant, time.monotonic() when read)."""

    def variant_for(self, owner: str) -> Variant:
        """The variant ``owner`` is pinned to, else the ``default_variant`` setting.

        Read on every search, so the answer is kept for ``read_consistency_s``
        (the bound within which other processes' writes are seen anyway); this
        process's own :meth:`pin` takes effect at once.
        """
        now = time.monotonic()
        with self._lock:
            known = self._known.get(owner)
        if known is not None and now - known[1] < self._settings.read_consistency_s:
            return known[0]
        variant = self._settings.default_variant
        with self._db.session() as session:
            row = session.get(OwnerVariantRow, owner)
            if row is not None and row.variant in ("learned", "baseline"):
                variant = row.variant  # type: ignore[assignment]  # checked above
        with self._lock:
            self._known[owner] = (variant, now)
        return variant

    def pin(self, owner: str, variant: Variant | None) -> None:
        """Pin ``owner`` to ``variant``; None removes the pin."""
        with self._db.session() as session:
            if variant is None:
                session.execute(delete(OwnerVariantRow).where(OwnerVariantRow.owner == owner))
            else:
                values = {"owner": owner, "variant": variant, "updated_at": utcnow()}
                upsert(session, OwnerVariantRow, values, update=["variant", "updated_at"])
        with self._lock:  # after the commit: a read racing it cannot keep the old pin
            self._known.pop(owner, None)
