"""Opening the LanceDB memory table: connect, open or create it, check its embedding model.

A :class:`TableHandle` holds the open table and reopens it with fresh caches.

The table records the embedding model and vector dimension it was created
for (:data:`~.lance_rows.MODEL_KEY`, :data:`~.lance_rows.DIM_KEY` in its
schema metadata); a store opened with another model is refused.
"""

from __future__ import annotations

from datetime import timedelta

import lancedb
import pyarrow as pa
from lancedb.index import IndexConfig
from lancedb.table import AsyncTable

from tribal_memory.base.errors import EmbeddingModelMismatch
from tribal_memory.store.event_loop import EventLoop, shared_event_loop
from tribal_memory.store.lance_index import ensure_indexes, ivf_segments
from tribal_memory.store.lance_rows import (
    DIM_KEY,
    MODEL_KEY,
    TABLE,
    new_table_options,
    table_schema,
)


class TableHandle:
    """The open memory table and the LanceDB session holding its caches; reopened fresh on demand.

    LanceDB's index cache keeps the data of every index version a search
    read, a replaced one included, until its bound evicts it, and has no way
    to be cleared. After an IVF rebuild the old index's partitions (370 MB
    of IVF_SQ at a million memories, 1.5 GB of IVF_FLAT) stay in it until
    the bound evicts them.
    :meth:`reopen` opens the table again in a new session, so the old cache
    is freed once the calls still running on the old handle are done.
    Everything that reads the table reads :attr:`table` at each call.

    Args:
        loop: The event loop the table's calls run on.
        uri: LanceDB location (a directory path or any URI LanceDB supports).
        model_id: Embedding model the vectors come from; recorded in a new table.
        dim: Vector dimension; recorded in a new table.
        read_consistency_s: Seconds after which the handle sees other processes' writes.
        index_cache_mb: Bound of LanceDB's index cache (MiB); a quarter of it
            bounds the metadata cache.

    Attributes:
        indices: The indexes the table had when first opened, before any
            were created here.

    Raises:
        EmbeddingModelMismatch: the table was created with another model or dimension.
        StoreUnavailable: the location cannot be opened or created.
    """

    def __init__(
        self,
        loop: EventLoop,
        uri: str,
        model_id: str,
        dim: int,
        *,
        read_consistency_s: float,
        index_cache_mb: int,
    ) -> None:
        self._loop = loop
        self._uri = uri
        self._read_consistency_s = read_consistency_s
        self._cache_bytes = index_cache_mb * 1024**2
        self._session = self._new_session()
        self._table, self.indices = loop.run(
            "open", _open(uri, model_id, dim, read_consistency_s, self._session)
        )

    @property
    def table(self) -> AsyncTable:
        """The table handle to run a call on (read it again for each call)."""
        return self._table

    @property
    def cache_bytes(self) -> int:
        """Bytes in LanceDB's index and metadata caches of the current session."""
        return int(self._session.size_bytes)

    def reopen(self) -> None:
        """Open the table again, at its newest version, in a new session with empty caches.

        Calls running on the old handle finish on it; the old session's
        memory goes when the last of them is done.

        Raises:
            StoreUnavailable: the table cannot be opened.
        """
        session = self._new_session()
        table = self._loop.run("open", _reopen(self._uri, self._read_consistency_s, session))
        self._table, self._session = table, session

    def _new_session(self) -> lancedb.Session:
        return lancedb.Session(
            index_cache_size_bytes=self._cache_bytes,
            metadata_cache_size_bytes=self._cache_bytes // 4,
        )


async def recorded_model(uri: str) -> tuple[str, int] | None:
    """(model id, dimension) recorded in the table at ``uri``; None when there is no table.

    LanceDB's errors pass (run it through :meth:`EventLoop.run`).
    """
    db = await lancedb.connect_async(uri)
    if TABLE not in (await db.list_tables()).tables:
        return None
    meta = (await (await db.open_table(TABLE)).schema()).metadata or {}
    return meta.get(MODEL_KEY, b"?").decode(), int(meta.get(DIM_KEY, b"0"))


def read_ivf_segments(uri: str) -> int:
    """Segments of the IVF index of the memory table at ``uri`` (0: no index or no table).

    For a tool watching a store another process writes (``bench perf``): a
    handle of its own, reads only (no table or index is created).

    Raises:
        StoreUnavailable: the location cannot be read.
    """

    async def read() -> int:
        db = await lancedb.connect_async(uri)
        if TABLE not in (await db.list_tables()).tables:
            return 0
        return await ivf_segments(await db.open_table(TABLE))

    return int(shared_event_loop().run("read", read()))


async def _connect(
    uri: str, read_consistency_s: float, session: lancedb.Session
) -> lancedb.AsyncConnection:
    return await lancedb.connect_async(
        uri, read_consistency_interval=timedelta(seconds=read_consistency_s), session=session
    )


async def _reopen(uri: str, read_consistency_s: float, session: lancedb.Session) -> AsyncTable:
    return await (await _connect(uri, read_consistency_s, session)).open_table(TABLE)


async def _open(
    uri: str, model_id: str, dim: int, read_consistency_s: float, session: lancedb.Session
) -> tuple[AsyncTable, list[IndexConfig]]:
    db = await _connect(uri, read_consistency_s, session)
    if TABLE in (await db.list_tables()).tables:
        table = await db.open_table(TABLE)
    else:
        table = await db.create_table(
            TABLE,
            schema=table_schema(model_id, dim),
            exist_ok=True,
            storage_options=new_table_options(),
        )
    _check_model(await table.schema(), model_id, dim)
    return table, await ensure_indexes(table)


def _check_model(schema: pa.Schema, model_id: str, dim: int) -> None:
    meta = schema.metadata or {}
    stored_model = meta.get(MODEL_KEY, b"?").decode()
    stored_dim = int(meta.get(DIM_KEY, b"0"))
    if stored_model != model_id or stored_dim != dim:
        raise EmbeddingModelMismatch(
            f"the store was built with embedding model {stored_model} ({stored_dim}-d) "
            f"but this instance uses {model_id} ({dim}-d); use the same "
            "model (TRIBAL_EMBEDDING_MODEL) or another data directory"
        )
