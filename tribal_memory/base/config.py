"""Settings: the one place environment variables are read.

Every setting has a default, a unit in its name where it has one, and the
environment variable ``TRIBAL_<NAME>`` (upper case). ``Settings()`` reads the
environment when it is constructed, never at import time.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal

import platformdirs
from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from tribal_memory.base.results import LearnedParts

DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_KEEP_VERSIONS_S = 10
"""Default of :attr:`Settings.keep_versions_s`, shared by the store's constructors."""
DEFAULT_ANN_QUANTISED_MIN_ROWS = 500_000
"""Default of :attr:`Settings.ann_quantised_min_rows`, shared by the store's constructors."""
DEFAULT_ROW_KEYS_MAX_ROWS = 4_000_000
"""Default of :attr:`Settings.row_keys_max_rows`, shared by the store's constructors."""
DEFAULT_WHOLE_ROWS_MAX_MB = 128
"""Default of :attr:`Settings.whole_rows_max_mb`, shared by the store's constructors."""
_LOCAL_HOST_NAMES = ("localhost", "127.0.0.1", "::1")
_WILDCARD_BINDS = ("0.0.0.0", "::", "")

AuthMode = Literal["off", "required", "auto"]
"""``TRIBAL_AUTH``: ``required``, ``off``, or ``auto`` (required unless bound to loopback)."""

CommaList = Annotated[tuple[str, ...], NoDecode]
"""A list setting read from the environment as comma-separated values."""


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` keeps a server reachable from this machine only.

    ``localhost`` and loopback addresses (127.0.0.0/8, ::1) are; anything
    else, including ``0.0.0.0`` and host names, is not.
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def auth_enabled(mode: AuthMode, host: str) -> bool:
    """Whether requests need a key: ``required``, or ``auto`` on a non-loopback bind."""
    return mode == "required" or (mode == "auto" and not is_loopback(host))


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
    database_url: str | None = None
    """SQLAlchemy URL of the SQL database (relations, learned tables, keys, documents), e.g.
    ``postgresql+psycopg://user:password@host:5432/tribal``; unset: the SQLite file
    ``tribal.sqlite3`` in ``data_dir``."""
    lancedb_uri: str = Field(default="", validate_default=True)
    """Location of the LanceDB store: a directory or any URI LanceDB supports (``s3://``,
    ``gs://``, ``az://``); unset: ``<data_dir>/lancedb``."""
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    """A fastembed model name, or a directory holding ``model.onnx`` and tokenizer files."""
    embedding_threads: int = Field(default=0, ge=0)
    """ONNX Runtime intra-op threads; 0 lets the runtime choose."""
    embedding_query_threads: int = Field(default=1, ge=0)
    """ONNX Runtime threads of query embeddings (their own session); 0 lets the runtime choose."""
    embed_batch_size: int = Field(default=32, ge=1, le=1024)
    """Most texts in one embedding call (reached by short facts)."""
    embed_batch_chars: int = Field(default=1500, ge=1)
    """Most padded characters (texts x longest text) in one embedding call; long chunks
    go in smaller batches."""

    host: str = "127.0.0.1"
    """Interface the HTTP server binds to."""
    port: int = Field(default=18960, ge=0, le=65535)
    """TCP port of the HTTP server. The default stays clear of OpenClaw's gateway (18789) and
    the ports it derives from it (18790-18899), so both run on one machine."""
    access_log: bool = True
    """Log one line per HTTP request to stderr (uvicorn's access log). Off, a cache hit
    answered 0.1-0.2 ms sooner (docs: benchmarks, "The request path")."""
    auth: AuthMode = "auto"
    """API keys: ``required``, ``off``, or ``auto`` (required unless ``host`` is a loopback
    address)."""

    allowed_hosts: CommaList = ()
    """Host names (or ``*``) the HTTP server answers for, comma-separated; other ``Host``
    headers get 421 (DNS rebinding). Unset: the bound ``host`` plus ``localhost``,
    ``127.0.0.1`` and ``::1``; any host when bound to all interfaces (``0.0.0.0``)."""
    cors_origins: CommaList = ()
    """Web origins (``https://app.example``, or ``*``) allowed to call the API from a browser,
    comma-separated. Unset: requests carrying a foreign ``Origin`` get 403."""

    dashboard: bool = True
    """Serve the web dashboard at ``/ui`` (same keys and owner scoping as the API);
    false: no ``/ui``."""

    max_content_chars: int = Field(default=20_000, ge=1)
    """Longest memory content accepted, in characters (longer: HTTP 413)."""
    max_tags: int = Field(default=256, ge=1)
    """Most tags on one memory (more: HTTP 413)."""
    max_metadata_bytes: int = Field(default=64 * 1024, ge=2)
    """Largest ``metadata`` of one memory, in bytes of compact JSON (larger: HTTP 413)."""
    max_batch_size: int = Field(default=512, ge=1)
    """Most memories in one batch capture (more: HTTP 413)."""
    max_k: int = Field(default=200, ge=1)
    """Largest ``k`` a recall or search may ask for (larger: HTTP 413)."""
    max_request_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    """Largest HTTP request body, in bytes (larger: HTTP 413)."""
    transfer_batch_rows: int = Field(default=500, ge=1, le=100_000)
    """Memories or table rows read, embedded or written per batch by export and import."""

    chunk_tokens: int = Field(default=512, ge=16, le=8192)
    """Most tokens in a document chunk (the embedding model's tokenizer, special tokens not
    counted). The default model embeds only the first 254 tokens of a text; BM25 indexes all."""
    chunk_overlap_tokens: int = Field(default=20, ge=0)
    """Most tokens a document chunk repeats from the end of the chunk before it
    (below ``chunk_tokens``)."""
    max_document_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    """Largest document accepted, in bytes (larger: HTTP 413; the CLI reports the file failed)."""
    max_document_chars: int = Field(default=2_000_000, ge=1)
    """Most characters of text in one document, a PDF's checked page by page while its text
    is extracted (more: HTTP 413). Compressed PDFs can expand a thousandfold."""
    max_document_chunks: int = Field(default=2_000, ge=1)
    """Most chunks one document may make (more: HTTP 413)."""
    pdf_timeout_s: float = Field(default=60.0, gt=0.0)
    """Longest a PDF's text extraction may take, in seconds (longer: stopped, HTTP 413)."""
    summaries: Literal["off", "extractive", "llm"] = "extractive"
    """Section and document summaries made on ingest: ``extractive`` (each section's most
    central sentences by embedding similarity, no network), ``llm`` (an OpenAI-compatible
    chat model at ``llm_url``, extractive when it fails or is not configured) or ``off``."""
    summary_sentences: int = Field(default=3, ge=1, le=20)
    """Most sentences in an extractive summary."""
    summary_max_chars: int = Field(default=600, ge=80, le=4000)
    """Longest summary text, in characters (its heading line not counted)."""
    summary_llm_timeout_s: float = Field(default=20.0, gt=0.0)
    """Longest wait for one LLM summary, in seconds; then the extractive summary is used."""

    fusion: Literal["weighted", "rrf"] = "weighted"
    """How hybrid search fuses vector and BM25 results."""
    fusion_normalisation: Literal["min-max", "max"] = "min-max"
    """How weighted fusion puts each part on [0, 1]: ``min-max`` over its candidates, or
    ``max`` (cosine clipped at 0, BM25 over the query's best)."""
    vector_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    """Weight of the vector score in weighted fusion; BM25 gets ``1 - vector_weight``."""
    neighbour_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    """Share of the best adjacent candidate's score (same ``doc_id``, ``chunk_index`` one
    apart) added to a hybrid search candidate's; 0 turns neighbour smoothing off."""
    graph_expansion_weight: float = Field(default=0.1, ge=0.0, le=1.0)
    """Share of the best related candidate's score (relation, heading parent, same
    section) added to a candidate's in ``hybrid_expanded`` searches (DESIGN §7).

    0.1, not DESIGN's 0.3: the best weight on the inner half of the LoCoMo dev
    questions (``benchmarks/graph_sweep.py``; see docs/history.md, graph-expanded search).
    """
    rrf_k: int = Field(default=60, ge=1)
    """The constant k of reciprocal rank fusion (Cormack et al., SIGIR 2009)."""
    candidate_pool: int = Field(default=150, ge=1)
    """Candidates fetched from each of vector and BM25 search before fusion (at least k)."""
    fts_min_rows: int = Field(default=3, ge=0)
    """Fewest visible memories for BM25 to run; below it search falls back to vector."""
    near_duplicate_threshold: float = Field(default=0.95, ge=0.0, le=1.0)
    """Cosine similarity at which a capture reports a near-duplicate (1.0 disables)."""

    ann_index_min_rows: int = Field(default=5_000, ge=256)
    """Rows at which an IVF_FLAT vector index is built; below it search is exact."""
    ann_quantised_min_rows: int = Field(default=DEFAULT_ANN_QUANTISED_MIN_ROWS, ge=0)
    """Rows at which the IVF index, when (re)built, keeps its vectors quantised to 8 bits
    (IVF_SQ, a quarter of IVF_FLAT's size) and searches re-rank twice their results by the
    full vectors (scores stay exact cosines); below it IVF_FLAT."""
    ann_nprobes: int = Field(default=32, ge=1)
    """IVF partitions searched per vector query (more: higher recall, slower), up to 250k
    indexed rows; past that more, with the square root of the size (64 at a million)."""
    exact_vector_max_rows: int = Field(default=25_000, ge=0)
    """Tables of up to this many memories keep a copy of their vectors in memory and answer
    vector search exactly from it (about 1.5 KB a memory); 0: every search asks LanceDB."""
    row_keys_max_rows: int = Field(default=DEFAULT_ROW_KEYS_MAX_ROWS, ge=0)
    """Tables of up to this many memories keep every row's key (id, owner, document, position)
    in memory, read in one scan (about 65 MB a million memories), so a search reads none of its
    candidates' rows; 0: each key is read when a search first returns its row."""
    whole_rows_max_mb: int = Field(default=DEFAULT_WHOLE_ROWS_MAX_MB, ge=0)
    """Tables whose rows (every column but the vector) take at most this many MiB of memory
    keep them all with their keys (same scan), so a search reads its hits from memory too
    (about 17 MB a hundred thousand short memories); 0: hits are read from LanceDB."""
    optimize_every_rows: int = Field(default=2_000, ge=1)
    """Least rows written between automatic ``optimize()`` runs (fold into indexes, compact)."""
    optimize_growth: float = Field(default=0.1, gt=0.0, le=1.0)
    """Also wait until this fraction of the table was written before an automatic ``optimize()``."""
    optimize_interval_s: float = Field(default=60.0, ge=0.0)
    """Seconds after an ``optimize()`` past which ``optimize_every_rows`` new rows call for
    the next one even below ``optimize_growth`` (rows outside the indexes slow searches);
    also the quiet time (no write) after which fewer rows are folded in. Searches that read
    the unindexed rows fold them in sooner once they have paid for a run (``scan_cost``)."""
    optimize_small_fragments: int = Field(default=32, ge=1)
    """Small table fragments (left by small writes, updates and deletes) at which the
    automatic ``optimize()`` runs whatever the row count."""
    keep_versions_s: int = Field(default=DEFAULT_KEEP_VERSIONS_S, ge=0)
    """Seconds a superseded LanceDB table version stays on disk before ``optimize()`` removes
    it; keep it above every replica's ``read_consistency_s`` plus the longest search (backups
    and exports pin the version they read, whatever this is)."""
    malloc_arena_max: int = Field(default=2, ge=0)
    """glibc malloc arenas of the HTTP and MCP server processes (0: glibc's default, 8 per
    core)."""
    blas_threads: int = Field(default=1, ge=0)
    """numpy's BLAS threads in the HTTP and MCP server processes (0: the library's default,
    one per core)."""
    index_cache_mb: int = Field(default=1024, ge=16)
    """Bound (MiB) of LanceDB's in-memory index cache; a quarter more for table metadata."""
    read_consistency_s: float = Field(default=1.0, ge=0.0)
    """Seconds after which reads see writes made by other processes (0: every read checks)."""
    sqlite_busy_timeout_ms: int = Field(default=5000, ge=0)
    """How long a SQLite write waits for a lock, in milliseconds."""

    default_variant: Literal["learned", "baseline"] = "learned"
    """A/B variant of owners not pinned to one: ``learned`` or ``baseline`` (plain search)."""
    learned_cache: bool = True
    """Serve repeated questions from the query cache (once proven by feedback)."""
    learned_expansion: bool = True
    """Search keyword variants of the query (rule-based, learned, LLM) and fuse them."""
    learned_feedback: bool = True
    """Boost memories used for similar past queries, penalise ones retrieved but unused."""
    learned_anchors: bool = True
    """Match queries against the anchors (past questions) of memories."""
    learned_adapter: bool = True
    """Search with the owner's query adapter (a map of the query vector fitted from feedback)."""
    cache_min_successes: int = Field(default=3, ge=1)
    """Successful feedbacks a query needs before the cache answers it."""
    cache_min_success_rate: float = Field(default=0.8, ge=0.0, le=1.0)
    """Share of feedbacks that must be successes for the cache to answer."""
    semantic_cache_threshold: float = Field(default=0.97, ge=0.0, le=1.0)
    """Cosine similarity at which a reworded query hits a cached one (1.0: exact keys only)."""
    feedback_similarity: float = Field(default=0.7, ge=0.0, le=1.0)
    """Least cosine similarity of a past query for its feedback to count."""
    feedback_learning_rate: float = Field(default=0.5, gt=0.0, le=1.0)
    """Step of a used (query, memory) weight towards +1."""
    feedback_penalty_rate: float = Field(default=0.1, ge=0.0, le=1.0)
    """Step of a retrieved-but-unused (query, memory) weight towards -1."""
    feedback_penalty_depth: int = Field(default=10, ge=0)
    """Only unused hits ranked this high or higher are penalised (what a reader saw)."""
    feedback_half_life_days: float = Field(default=30.0, gt=0.0)
    """Age in days at which a feedback weight counts half."""
    max_boost: float = Field(default=0.3, ge=0.0, le=1.0)
    """Largest score a memory gains from feedback (added to its fused score)."""
    max_penalty: float = Field(default=0.05, ge=0.0, le=1.0)
    """Largest score a memory loses from feedback."""
    team_learning: bool = True
    """Pool what feedback teaches about ``shared`` memories (query weights, usage priors)
    across owners: one agent's feedback then helps every agent's search. Signals on an
    owner's own memories stay with that owner either way."""
    boost_relevance_gate: float = Field(default=1.0, ge=0.0, le=1.0)
    """How far a memory's feedback boost (usage prior included) depends on its own match to
    the query: the boost is scaled by ``(1 - gate) + gate * score`` (its fused score before
    learning, in [0, 1]); 0 lets past use lift a memory whatever the new question asks."""
    usage_prior_weight: float = Field(default=0.0, ge=0.0, le=1.0)
    """Largest score a retrieved memory gains for having been used before (any query). Off by
    default: with the query adapter it cost questions never fed back (``bench learn``)."""
    skip_prior_weight: float = Field(default=0.0, ge=0.0, le=1.0)
    """Largest score a retrieved memory loses for having been shown and not used before (any
    query; scaled like the boost by ``boost_relevance_gate``)."""
    adapter_min_questions: int = Field(default=20, ge=1)
    """Distinct questions of an owner with a used memory before its query adapter is fitted
    and used (with fewer, an adapter cost new questions recall in ``bench learn``)."""
    adapter_retrain_every: int = Field(default=10, ge=1)
    """Feedback events with a used memory after which an owner's adapter is fitted again
    (in the background; the new one replaces the old at once)."""
    adapter_penalty: float = Field(default=0.2, ge=0.0)
    """Weight of ``||W - I||^2`` when fitting a query adapter (higher: closer to plain search;
    0.2 measured better than 0.3 in ``bench learn``)."""
    adapter_temperature: float = Field(default=0.1, gt=0.0)
    """Softmax temperature over cosines when fitting a query adapter."""
    adapter_steps: int = Field(default=150, ge=1)
    """Full-batch Adam steps per adapter fit."""
    adapter_learning_rate: float = Field(default=0.01, gt=0.0)
    """Adam step size of an adapter fit."""
    adapter_negatives: int = Field(default=64, ge=0)
    """Random memories of the store per training pair, besides the hits shown and skipped."""
    anchor_min_uses: int = Field(default=2, ge=1)
    """Successful uses of a memory for a query before that query becomes its anchor."""
    anchor_weight: float = Field(default=0.6, ge=0.0, le=1.0)
    """Largest score an anchor match adds (the cap on anchors; above the larger fusion
    weight, so a full anchor match outranks a memory that one retrieval path alone found)."""
    anchor_min_match: float = Field(default=0.5, ge=0.0, le=1.0)
    """Least IDF-weighted share of the query's words an anchor must contain to count."""
    max_anchors_per_memory: int = Field(default=20, ge=1)
    """Most learned anchors kept per memory (the most used win)."""
    expansion_rules: bool = False
    """Use the rule-based keyword variants (see ``tribal_memory.learned.expander``).

    Off by default: on the inner split of the LoCoMo dev questions they changed
    no recall@10 at any expansion weight (and nothing on team-facts), while each
    costs a BM25 search.
    """
    expansion_learned: bool = False
    """Use the words of memories used for similar past queries as a variant.

    Off by default: in ``bench learn`` (two splits) leaving them out kept new
    questions where they were, gave questions never fed back about 0.6 points
    and took about 0.7 from those whose evidence was fed back; before an owner
    has a query adapter they cost never-fed questions 0.7 points. They are
    learned either way.
    """
    expansion_weight: float = Field(default=0.5, ge=0.0, le=1.0)
    """How much a variant's BM25 match counts next to the query's own."""
    llm_url: str | None = None
    """Base URL of an OpenAI-compatible API for LLM query variants (unset: off)."""
    llm_model: str | None = None
    """Model name sent to ``llm_url``."""
    llm_api_key: str | None = None
    """Bearer token for ``llm_url``, if it needs one."""
    llm_timeout_s: float = Field(default=2.0, gt=0.0)
    """Longest wait for LLM variants, in seconds; later answers are dropped."""

    context_max_tokens: int = Field(default=400, ge=32)
    """Largest ``<knowledge-graph>`` block ``POST /v1/context`` returns, in tokens of the
    packaged tokenizer; lines past it are dropped (neighbours first)."""

    @field_validator("lancedb_uri")
    @classmethod
    def _lancedb_in_data_dir(cls, value: str, info: ValidationInfo) -> str:
        if value.strip():
            return value.strip()
        data_dir = info.data.get("data_dir")
        return str(Path(data_dir) / "lancedb") if data_dir is not None else ""

    @field_validator("allowed_hosts", "cors_origins", mode="before")
    @classmethod
    def _split_commas(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("database_url")
    @classmethod
    def _blank_url_is_unset(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return value.strip()

    @field_validator("chunk_overlap_tokens")
    @classmethod
    def _overlap_below_chunk(cls, value: int, info: ValidationInfo) -> int:
        chunk = info.data.get("chunk_tokens")
        if chunk is not None and value >= chunk:
            raise ValueError(f"must be below chunk_tokens ({chunk})")
        return value

    @property
    def learned_parts(self) -> LearnedParts:
        """The learned parts switched on by these settings."""
        return LearnedParts(
            cache=self.learned_cache,
            expansion=self.learned_expansion,
            feedback=self.learned_feedback,
            anchors=self.learned_anchors,
            adapter=self.learned_adapter,
        )

    @property
    def auth_enabled(self) -> bool:
        """Whether HTTP requests need an API key (see ``auth``)."""
        return auth_enabled(self.auth, self.host)

    @property
    def host_allow_list(self) -> frozenset[str] | None:
        """Lower-case host names the HTTP server answers for; None: any host."""
        hosts = self.allowed_hosts
        if not hosts:
            if self.host.strip("[]") in _WILDCARD_BINDS:
                return None
            hosts = (self.host, *_LOCAL_HOST_NAMES)
        if "*" in hosts:
            return None
        return frozenset(h.strip("[]").lower() for h in hosts)

    @property
    def sqlite_path(self) -> Path:
        """The SQLite file holding relations and the learned tables (without ``database_url``)."""
        return self.data_dir / "tribal.sqlite3"

    @property
    def uses_data_dir(self) -> bool:
        """Whether ``data_dir`` holds any store: the SQLite file, or the LanceDB directory."""
        return self.database_url is None or self.lancedb_uri == str(self.data_dir / "lancedb")


DEFAULT_URL = "http://127.0.0.1:18960"
"""Where ``tribal-memory serve`` listens by default (``TRIBAL_HOST``, ``TRIBAL_PORT``)."""


class ClientSettings(BaseSettings):
    """Where the HTTP client finds a server: ``TRIBAL_URL``, ``TRIBAL_API_KEY``.

    Read when a client is made without a ``base_url`` or ``api_key`` (and by
    the CLI's ``--url``); arguments given win over the environment. Invalid
    values raise ``pydantic.ValidationError`` at construction.
    """

    model_config = SettingsConfigDict(
        env_prefix="TRIBAL_", frozen=True, extra="ignore", use_attribute_docstrings=True
    )

    url: str | None = None
    """Base URL of a running server (e.g. ``http://127.0.0.1:18960``); unset: the CLI opens
    the data dir itself, and a client object connects to ``http://127.0.0.1:18960``."""
    api_key: str | None = None
    """API key the client sends as ``Authorization: Bearer``; unset: none (a server without
    authentication)."""
    client_timeout_s: float = Field(default=60.0, gt=0.0)
    """Longest wait of the HTTP client for one response, in seconds."""

    @field_validator("url", "api_key")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return value.strip()
