"""Opening the LanceDB memory table: connect, open or create it, check its embedding model.

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
from tribal_memory.store.event_loop import EventLoop
from tribal_memory.store.lance_index import ensure_indexes
from tribal_memory.store.lance_rows import (
    DIM_KEY,
    MODEL_KEY,
    TABLE,
    new_table_options,
    table_schema,
)


def open_table(
    loop: EventLoop,
    uri: str,
    model_id: str,
    dim: int,
    *,
    read_consistency_s: float,
    index_cache_mb: int,
) -> tuple[AsyncTable, list[IndexConfig], lancedb.Session]:
    """Open the memory table at ``uri``, creating it (and its indexes) when missing.

    Args:
        loop: The event loop the table's calls run on.
        uri: LanceDB location (a directory path or any URI LanceDB supports).
        model_id: Embedding model the vectors come from; recorded in a new table.
        dim: Vector dimension; recorded in a new table.
        read_consistency_s: Seconds after which the handle sees other processes' writes.
        index_cache_mb: Bound of LanceDB's index cache (MiB); a quarter of it
            bounds the metadata cache.

    Returns:
        The table handle, the indexes it had before any were created here,
        and the LanceDB session holding the handle's caches.

    Raises:
        EmbeddingModelMismatch: the table was created with another model or dimension.
        StoreUnavailable: the location cannot be opened or created.
    """
    session = lancedb.Session(
        index_cache_size_bytes=index_cache_mb * 1024**2,
        metadata_cache_size_bytes=index_cache_mb * 1024**2 // 4,
    )
    table, indices = loop.run("open", _open(uri, model_id, dim, read_consistency_s, session))
    return table, indices, session


async def recorded_model(uri: str) -> tuple[str, int] | None:
    """(model id, dimension) recorded in the table at ``uri``; None when there is no table.

    LanceDB's errors pass (run it through :meth:`EventLoop.run`).
    """
    db = await lancedb.connect_async(uri)
    if TABLE not in (await db.list_tables()).tables:
        return None
    meta = (await (await db.open_table(TABLE)).schema()).metadata or {}
    return meta.get(MODEL_KEY, b"?").decode(), int(meta.get(DIM_KEY, b"0"))


async def _open(
    uri: str, model_id: str, dim: int, read_consistency_s: float, session: lancedb.Session
) -> tuple[AsyncTable, list[IndexConfig]]:
    db = await lancedb.connect_async(
        uri, read_consistency_interval=timedelta(seconds=read_consistency_s), session=session
    )
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
