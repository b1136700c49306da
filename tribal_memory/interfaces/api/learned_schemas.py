"""Request and response bodies of the learned layer: usage feedback, anchors, A/B variants."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from tribal_memory.base.results import Variant
from tribal_memory.interfaces.api.schemas import Ids, _Request


class FeedbackRequest(_Request):
    """Which hits of a logged retrieval were used (``[]``: none was useful).

    ``owner``: when given, only that owner's retrievals are visible.
    """

    retrieval_id: str
    used_ids: Ids
    owner: str | None = None


class FeedbackOut(msgspec.Struct):
    """Outcome of usage feedback.

    ``used``/``unused``: memory ids of the retrieval reported used and not
    used. ``duplicate``: the same feedback had been recorded before (nothing
    applied twice). ``anchors_created``: anchors that became active through it.
    """

    retrieval_id: str
    used: list[str]
    unused: list[str]
    duplicate: bool
    anchors_created: int


class AnchorRequest(_Request):
    """A question the memory answers, attached as a manual anchor (active at once)."""

    text: str


class AnchorOut(msgspec.Struct):
    """A query text attached to a memory so the memory is found by it.

    ``source``: ``manual`` (added by hand) or ``learned`` (from feedback,
    ``active`` once used often enough). ``confidence`` in [0, 1]: 1.0 for
    manual anchors, else the share of the needed uses reached. ``owner``:
    whose searches use it (``shared``: everyone's).
    """

    memory_id: str
    text: str
    source: Literal["manual", "learned", "llm"]
    confidence: float
    uses: int
    active: bool
    created_at: datetime
    owner: str


class AnchorsOut(msgspec.Struct):
    """Anchors of one memory, active and pending, most used first (empty: none)."""

    anchors: list[AnchorOut]


class VariantRequest(_Request):
    """The A/B variant to pin an owner to: ``learned`` or ``baseline`` (plain search)."""

    variant: Variant


class VariantOut(msgspec.Struct):
    """The A/B variant that serves ``owner`` (its pin, else the default)."""

    owner: str
    variant: Variant
