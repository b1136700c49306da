"""SQLAlchemy 2.0 typed tables: relations, the learned layer (DESIGN §2), API keys, documents.

Schema changes go through Alembic migrations in ``migrations/``; this module
is their source of truth (``target_metadata``) and is never used to create
tables directly. ORM objects stay inside the modules that query them.

Export and import (:mod:`tribal_memory.ops.transfer`) copy every table declared
here except ``transfer.records.EXCLUDED_TABLES`` (``api_keys``): add a table
holding secrets there. They read a row's references from column names: a
column ``owner`` scopes the row to that owner, ``memory_id`` (a JSON list:
``memory_ids``) ties it to memories, so name such columns that way.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Declarative base; ``Base.metadata`` is Alembic's target."""


class RelationRow(Base):
    """A typed edge between two memories; unique per (source, target, type)."""

    __tablename__ = "relations"

    source_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    target_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    type: Mapped[str] = mapped_column(String(64), primary_key=True)
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (Index("ix_relations_target", "target_id"),)


class QueryCacheRow(Base):
    """A normalised query and the memories that answered it, with outcome counts.

    Every query that received feedback has a row (also those that never
    succeeded); ``query_vector`` (float32 bytes) lets similar later queries find
    it, and ``hits`` is the snapshot a cache hit returns: ``[{"memory": {...},
    "score": float, "uses": int}]``, best first.
    """

    __tablename__ = "query_cache"

    owner: Mapped[str] = mapped_column(String(128), primary_key=True)
    query_key: Mapped[str] = mapped_column(String(512), primary_key=True)
    query_text: Mapped[str] = mapped_column(Text)
    memory_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    success_count: Mapped[int] = mapped_column(Integer, default=0)
    failure_count: Mapped[int] = mapped_column(Integer, default=0)
    last_success: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    query_vector: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    hits: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RetrievalEventRow(Base):
    """One logged retrieval: the query, the variant that served it, its ranked results."""

    __tablename__ = "retrieval_events"

    retrieval_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128), index=True)
    query: Mapped[str] = mapped_column(Text)
    variant: Mapped[str] = mapped_column(String(32))
    results: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    used_ids: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, index=True
    )
    feedback_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    cache_hit: Mapped[bool] = mapped_column(Boolean, default=False)
    parts: Mapped[list[str]] = mapped_column(JSON, default=list)
    session_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    filter_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """Fingerprint of the search's filters beyond owner and shared (null or empty: none)."""

    __table_args__ = (Index("ix_retrieval_events_session", "owner", "session_id"),)


class QueryFactWeightRow(Base):
    """Reinforcement weight of a (normalised query, memory) pair."""

    __tablename__ = "query_fact_weights"

    owner: Mapped[str] = mapped_column(String(128), primary_key=True)
    query_key: Mapped[str] = mapped_column(String(512), primary_key=True)
    memory_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    weight: Mapped[float] = mapped_column(Float, default=0.0)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (Index("ix_query_fact_weights_memory", "memory_id"),)


class FactAnchorRow(Base):
    """A query text attached to a memory so the memory is findable by it.

    ``owner``: whose searches use the anchor: the owner whose feedback made a
    learned anchor, the memory's owner for a manual one (``shared``: everyone's).
    """

    __tablename__ = "fact_anchors"

    memory_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128), primary_key=True)
    anchor_text: Mapped[str] = mapped_column(String(1024), primary_key=True)
    source: Mapped[str] = mapped_column(String(16), default="learned")
    confidence: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    uses: Mapped[int] = mapped_column(Integer, default=0)

    __table_args__ = (Index("ix_fact_anchors_owner", "owner"),)


class QueryExpansionRow(Base):
    """A learned keyword variant of a normalised query."""

    __tablename__ = "query_expansions"

    owner: Mapped[str] = mapped_column(String(128), primary_key=True)
    query_key: Mapped[str] = mapped_column(String(512), primary_key=True)
    expansion: Mapped[str] = mapped_column(String(1024), primary_key=True)
    weight: Mapped[float] = mapped_column(Float, default=0.0)


class QueryAdapterRow(Base):
    """An owner's fitted query adapter (:mod:`tribal_memory.learned.adapter`).

    ``weights``: the ``dim x dim`` map as little-endian float32, row-major.
    ``questions``: distinct questions with a used memory it was fitted on;
    ``events``: feedback events with a used memory it saw (the next fit is due
    ``adapter_retrain_every`` events later). Every change bumps the counter
    ``query_adapter:<owner>``, so each process re-reads it once.
    """

    __tablename__ = "query_adapters"

    owner: Mapped[str] = mapped_column(String(128), primary_key=True)
    dim: Mapped[int] = mapped_column(Integer)
    weights: Mapped[bytes] = mapped_column(LargeBinary)
    questions: Mapped[int] = mapped_column(Integer)
    events: Mapped[int] = mapped_column(Integer)
    trained_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LearnedGenerationRow(Base):
    """A change counter of learned data, kept by database triggers (never written by code).

    ``name`` is ``query_cache:<owner>`` (any change to that owner's cache
    entries) or ``fact_anchors`` (any change to any anchor); see
    :func:`tribal_memory.base.sql.read_generation`. Derived state: not exported.
    """

    __tablename__ = "learned_generations"

    name: Mapped[str] = mapped_column(String(160), primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger, default=0)


class LearnedChangeRow(Base):
    """What one counted change touched (written by database triggers, never by code).

    ``name`` and ``generation``: the counter and its value after the change;
    ``item``: the changed row's query key (``query_cache:<owner>``) or memory
    id (``fact_anchors``). The last ``KEEP_CHANGES`` per counter are kept
    (:mod:`tribal_memory.base.generation_triggers`); see
    :func:`tribal_memory.base.sql.read_changes`. Derived state: not exported.
    """

    __tablename__ = "learned_changes"

    name: Mapped[str] = mapped_column(String(160), primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    item: Mapped[str] = mapped_column(String(512))


class OwnerVariantRow(Base):
    """An owner pinned to an A/B variant (``learned`` or ``baseline``)."""

    __tablename__ = "owner_variants"

    owner: Mapped[str] = mapped_column(String(128), primary_key=True)
    variant: Mapped[str] = mapped_column(String(16))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ApiKeyRow(Base):
    """An API key: only the SHA-256 of its secret is stored, never the key itself."""

    __tablename__ = "api_keys"

    key_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128), index=True)
    admin: Mapped[bool] = mapped_column(Boolean, default=False)
    secret_hash: Mapped[str] = mapped_column(String(64))
    label: Mapped[str] = mapped_column(String(256), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class DocumentRow(Base):
    """An ingested document: one row per (owner, path).

    ``content_hash``: SHA-256 (hex) of the bytes last ingested; ``chunking``:
    the chunker version and chunk sizes they were cut with (``v1:512/20``).

    ``chunks`` lists the document's chunk memories in order, each
    ``{"memory_id": str, "parent_id": str | None, "metadata": {...}}``: the
    id plus the fields that place the chunk in this document (its index is its
    position). A chunk whose text also occurs in another document of the same
    owner is one memory; the placement kept here lets it be re-pointed at the
    other document when this one drops it.

    ``summaries`` lists its summary memories, each ``{"memory_id": str,
    "section": int | None, "source_hash": str}`` (``section`` None: the
    document's own; see :mod:`tribal_memory.documents.summary_sync`).
    """

    __tablename__ = "documents"

    owner: Mapped[str] = mapped_column(String(128), primary_key=True)
    path: Mapped[str] = mapped_column(String(1024), primary_key=True)
    doc_id: Mapped[str] = mapped_column(String(64))
    content_hash: Mapped[str] = mapped_column(String(64))
    chunking: Mapped[str] = mapped_column(String(64))
    format: Mapped[str] = mapped_column(String(16))
    chunks: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    summaries: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list, server_default="[]")
    byte_size: Mapped[int] = mapped_column(Integer)
    ingested_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    __table_args__ = (Index("ix_documents_doc_id", "owner", "doc_id"),)
