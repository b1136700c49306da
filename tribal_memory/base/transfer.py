"""What an import did: counts per kind of record, conflicts, re-embedded memories.

Made by :mod:`tribal_memory.ops.transfer`; here so that every layer (and the
HTTP client) can speak of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

Source = Path | bytes | IO[bytes]
"""An export to import: a file path, the file's bytes, or a seekable binary file."""
OnConflict = Literal["keep", "replace"]
"""Which wins when the file and this instance hold the same memory with other fields."""


@dataclass(frozen=True, slots=True)
class TransferCounts:
    """Outcome for one kind of record.

    ``created``: written. ``skipped``: already there (same memory id or
    primary key), left as it was. ``orphaned``: not written because a memory
    it refers to exists neither in the file nor in this instance.
    """

    created: int = 0
    skipped: int = 0
    orphaned: int = 0


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What an import did.

    ``embedding_model``/``embedding_dim``: the model of the file's vectors.
    ``reembedded``: memories whose vectors were computed again with this
    instance's model because that differs (0 when the models match and the
    stored vectors were written as they are). ``rows`` is keyed by table name.
    ``conflicts``: how many memories of the file were stored here with other
    fields (tags, kind, source, times, metadata; the content is the same, as
    the id says), and ``conflict_ids`` the first 100 of them; ``replaced``:
    how many of those the file's version overwrote (``on_conflict="replace"``;
    else 0 and the stored ones stayed, counted as skipped).
    """

    embedding_model: str
    embedding_dim: int
    reembedded: int
    memories: TransferCounts
    relations: TransferCounts
    rows: dict[str, TransferCounts] = field(default_factory=dict)
    conflicts: int = 0
    conflict_ids: list[str] = field(default_factory=list)
    replaced: int = 0
