"""Settings: the one place environment variables are read.

Every setting has a default, a unit in its name where it has one, and the
environment variable ``TRIBAL_<NAME>`` (upper case). ``Settings()`` reads the
environment when it is constructed, never at import time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def default_data_dir() -> Path:
    """The per-user data directory (e.g. ``~/.local/share/tribal-memory``)."""
    return Path(platformdirs.user_data_dir("tribal-memory", appauthor=False))


class Settings(BaseSettings):
    """Frozen configuration of one tribal-memory instance.

    Construct with keyword overrides (``Settings(data_dir=tmp)``) or from the
    environment (``TRIBAL_DATA_DIR=...``). Invalid values raise
    ``pydantic.ValidationError`` at construction.
    """

    model_config = SettingsConfigDict(
        env_prefix="TRIBAL_", frozen=True, extra="forbid", use_attribute_docstrings=True
    )

    data_dir: Path = Field(default_factory=default_data_dir)
    """Directory holding the LanceDB store (``lancedb/``) and the SQLite file."""
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    """A fastembed model name, or a directory holding ``model.onnx`` and tokenizer files."""
    embedding_threads: int = Field(default=0, ge=0)
    """ONNX Runtime intra-op threads; 0 lets the runtime choose."""
    embed_batch_size: int = Field(default=32, ge=1, le=1024)
    """Most texts in one embedding call (reached by short facts)."""
    embed_batch_chars: int = Field(default=1500, ge=1)
    """Most padded characters (texts x longest text) in one embedding call; long chunks
    go in smaller batches."""

    host: str = "127.0.0.1"
    """Interface the HTTP server binds to."""
    port: int = Field(default=18790, ge=0, le=65535)
    """TCP port of the HTTP server."""

    max_content_chars: int = Field(default=20_000, ge=1)
    """Longest memory content accepted, in characters (longer: HTTP 413)."""
    max_batch_size: int = Field(default=512, ge=1)
    """Most memories in one batch capture (more: HTTP 413)."""
    max_k: int = Field(default=200, ge=1)
    """Largest ``k`` a recall or search may ask for (larger: HTTP 413)."""
    max_request_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    """Largest HTTP request body, in bytes (larger: HTTP 413)."""

    fusion: Literal["weighted", "rrf"] = "weighted"
    """How hybrid search fuses vector and BM25 results."""
    vector_weight: float = Field(default=0.6, ge=0.0, le=1.0)
    """Weight of the vector score in weighted fusion; BM25 gets ``1 - vector_weight``."""
    rrf_k: int = Field(default=60, ge=1)
    """The constant k of reciprocal rank fusion (Cormack et al., SIGIR 2009)."""
    candidate_pool: int = Field(default=50, ge=1)
    """Candidates fetched from each of vector and BM25 search before fusion (at least k)."""
    fts_min_rows: int = Field(default=3, ge=0)
    """Fewest visible memories for BM25 to run; below it search falls back to vector."""
    near_duplicate_threshold: float = Field(default=0.95, ge=0.0, le=1.0)
    """Cosine similarity at which a capture reports a near-duplicate (1.0 disables)."""

    ann_index_min_rows: int = Field(default=100_000, ge=256)
    """Rows at which an IVF ANN vector index is built; below it search is exact."""
    optimize_every_rows: int = Field(default=2_000, ge=1)
    """Rows written between automatic ``optimize()`` runs (fold into indexes, compact)."""
    keep_versions_s: int = Field(default=3600, ge=0)
    """Age in seconds past which old LanceDB table versions are removed by ``optimize()``."""
    read_consistency_s: float = Field(default=1.0, ge=0.0)
    """Seconds after which reads see writes made by other processes (0: every read checks)."""
    sqlite_busy_timeout_ms: int = Field(default=5000, ge=0)
    """How long a SQLite write waits for a lock, in milliseconds."""

    @property
    def lancedb_uri(self) -> str:
        """Location of the LanceDB database inside ``data_dir``."""
        return str(self.data_dir / "lancedb")

    @property
    def sqlite_path(self) -> Path:
        """The SQLite file holding relations and the learned tables."""
        return self.data_dir / "tribal.sqlite3"
