"""Response bodies of export and import (``/v1/export``, ``/v1/import``)."""

from __future__ import annotations

import msgspec


class TransferCountsOut(msgspec.Struct):
    """Outcome for one kind of imported record.

    ``created``: written. ``skipped``: already there (same memory id or
    primary key), left as it was. ``orphaned``: not written because a memory
    it refers to is neither in the file nor in this instance.
    """

    created: int
    skipped: int
    orphaned: int


class ImportOut(msgspec.Struct):
    """What ``POST /v1/import`` did.

    ``embedding_model``/``embedding_dim``: the model of the file's vectors.
    ``reembedded``: memories embedded again because that model differs from
    this server's (0: the stored vectors were kept). ``rows``: per learned
    table (``query_cache``, ``fact_anchors``, ...). ``conflicts``: memories
    stored here with other fields than the file's (``conflict_ids``: the
    first 100); ``replaced``: those the file's version overwrote
    (``?on_conflict=replace``; else the stored ones stayed).
    """

    embedding_model: str
    embedding_dim: int
    reembedded: int
    memories: TransferCountsOut
    relations: TransferCountsOut
    rows: dict[str, TransferCountsOut]
    conflicts: int
    conflict_ids: list[str]
    replaced: int
