"""Online backup and restore of a data dir (LanceDB memories + the SQLite file).

A backup is itself a data dir: point ``--data-dir`` at it, or copy it into
place with :func:`restore_backup`. It is taken while servers write:

1. Memories: the store copies itself as of now (:meth:`MemoryStore.copy_to`;
   every write acknowledged before the backup started is in the copy, later
   writes are not). For LanceDB: the ``memories`` table pinned at its current
   version, copied row by row into a new table with the same schema and model
   metadata, the full-text index rebuilt.
2. SQLite: copied with SQLite's online backup API, a consistent snapshot
   taken after step 1. From PostgreSQL (``database_url``), every table's rows
   are read in one repeatable-read transaction (a snapshot) and written into
   a new SQLite file of the backup, so the backup is a self-contained data dir.
3. SQL rows naming memories that are not in the LanceDB snapshot (captured
   or deleted between the two steps) are pruned, so the backup is consistent
   by :func:`tribal_memory.ops.maintenance.check_consistency`.

The backup is written to a temporary directory next to the destination and
renamed into place once complete, so a failed backup leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
import tempfile
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import SQLAlchemyError

from tribal_memory.base.config import Settings
from tribal_memory.base.db import (
    Database,
    describe_url,
    engine_for,
    error_text,
    make_engine,
    migrate,
)
from tribal_memory.base.errors import InvalidInput, StoreUnavailable
from tribal_memory.base.tables import Base
from tribal_memory.ops.maintenance import prune_orphans
from tribal_memory.store import StoreCopy, open_existing

MANIFEST = "backup.json"
"""File in a backup recording when and from which table version it was taken."""
_LANCEDB_DIR = "lancedb"
_SQLITE_FILE = "tribal.sqlite3"
_COPY_BATCH_ROWS = 2048


@dataclasses.dataclass(frozen=True)
class BackupReport:
    """What a backup holds.

    Attributes:
        path: The backup directory.
        memories: Memories copied (rows of the pinned LanceDB version).
        table_version: The LanceDB table version copied (0: no table yet).
        pruned_rows: SQL rows dropped because their memory is not in the snapshot.
        created_at: When the backup started (UTC).
    """

    path: Path
    memories: int
    table_version: int
    pruned_rows: int
    created_at: datetime

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form (the content of ``backup.json`` plus the path)."""
        return {
            "path": str(self.path),
            "memories": self.memories,
            "table_version": self.table_version,
            "pruned_rows": self.pruned_rows,
            "created_at": self.created_at.isoformat(),
        }


def _require_empty(path: Path, what: str) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise InvalidInput(f"{what} {path} exists and is not an empty directory")


def _copy_memories(source_uri: str, target_uri: str) -> StoreCopy:
    """Copy the memory store at ``source_uri`` as of now (version 0, no ids: it has none).

    Raises:
        StoreUnavailable: the store cannot be read or the copy cannot be written.
    """
    store = open_existing(source_uri)
    if store is None:
        return StoreCopy(0, [])
    try:
        return store.copy_to(target_uri)
    finally:
        store.close()


def _copy_sqlite(source: Path, target: Path, busy_timeout_ms: int) -> None:
    if not source.exists():
        return
    with (
        closing(sqlite3.connect(source, timeout=busy_timeout_ms / 1000)) as src,
        closing(sqlite3.connect(target)) as dst,
    ):
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=WAL")


def _copy_rows(source: Engine, target: Engine) -> None:
    """Every table's rows from ``source`` (one snapshot) into the migrated SQLite ``target``."""
    with (
        source.connect().execution_options(isolation_level="REPEATABLE READ") as src,
        target.begin() as dst,
    ):
        for table in Base.metadata.sorted_tables:
            if table.name in ("learned_generations", "learned_changes"):  # the target's triggers
                continue
            rows = src.execution_options(yield_per=_COPY_BATCH_ROWS).execute(select(table))
            for batch in rows.mappings().partitions():
                dst.execute(insert(table), [dict(row) for row in batch])


def _copy_sql(settings: Settings, work: Path) -> None:
    """The SQL side of ``settings`` into ``work/tribal.sqlite3``, migrated to head."""
    source = engine_for(settings)
    try:
        if source.dialect.name == "sqlite":
            database = Path(source.url.database or "")
            try:
                _copy_sqlite(database, work / _SQLITE_FILE, settings.sqlite_busy_timeout_ms)
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"cannot copy {database}: {exc}") from exc
            return
        target = make_engine(work / _SQLITE_FILE)
        try:
            migrate(target)
            _copy_rows(source, target)
        except SQLAlchemyError as exc:
            raise StoreUnavailable(
                f"cannot copy the database {describe_url(source.url)}: {error_text(exc)}"
            ) from exc
        finally:
            target.dispose()
    finally:
        source.dispose()


def create_backup(settings: Settings, destination: Path) -> BackupReport:
    """Snapshot the data dir of ``settings`` into ``destination`` while it may be in use.

    Needs no embedding model. See the module docstring for the consistency
    guarantee.

    Args:
        settings: Names the data dir to back up.
        destination: A directory that does not exist yet (or is empty).

    Returns:
        A :class:`BackupReport`; ``backup.json`` in the backup holds the same.

    Raises:
        InvalidInput: ``destination`` is not empty, or is inside the data dir.
        StoreUnavailable: either store cannot be read, or the backup cannot be
            written (nothing is left at ``destination``).
    """
    destination = destination.resolve()
    data_dir = settings.data_dir.resolve()
    if settings.database_url is None and not data_dir.is_dir():
        raise InvalidInput(f"no data dir at {data_dir}")
    if destination == data_dir or data_dir in destination.parents:
        raise InvalidInput("the backup must go outside the data dir")
    _require_empty(destination, "backup destination")
    started = datetime.now(UTC)
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    except OSError as exc:
        raise StoreUnavailable(f"cannot write the backup at {destination}: {exc}") from exc
    try:
        copied = _copy_memories(settings.lancedb_uri, str(work / _LANCEDB_DIR))
        _copy_sql(settings, work)
        engine = make_engine(work / _SQLITE_FILE)
        try:
            migrate(engine)
            pruned = prune_orphans(Database(engine), set(copied.memory_ids))
        finally:
            engine.dispose()
        report = BackupReport(destination, len(copied.memory_ids), copied.version, pruned, started)
        manifest = {k: v for k, v in report.as_dict().items() if k != "path"}
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        if destination.exists():
            destination.rmdir()
        work.rename(destination)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return report


def restore_backup(backup: Path, data_dir: Path) -> dict[str, object]:
    """Copy a backup made by :func:`create_backup` into an empty ``data_dir``.

    The copy is made next to ``data_dir`` and renamed into place, so an
    interrupted restore leaves ``data_dir`` as it was. Stop any server on
    ``data_dir`` first; the restored dir is opened by the next start.

    Returns:
        The backup's manifest (``memories``, ``table_version``, ``created_at``, ...).

    Raises:
        InvalidInput: ``backup`` is not a backup, or ``data_dir`` is not empty.
        StoreUnavailable: the copy failed (``data_dir`` is left as it was).
    """
    manifest_path = backup / MANIFEST
    if not manifest_path.is_file():
        raise InvalidInput(f"{backup} is not a tribal-memory backup (no {MANIFEST})")
    data_dir = data_dir.resolve()
    _require_empty(data_dir, "data dir")
    try:
        manifest: dict[str, object] = json.loads(manifest_path.read_text())
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{data_dir.name}.", dir=data_dir.parent))
    except (OSError, ValueError) as exc:
        raise StoreUnavailable(f"cannot restore {backup}: {exc}") from exc
    try:
        shutil.copytree(backup, work, dirs_exist_ok=True)
        if data_dir.exists():
            data_dir.rmdir()
        work.rename(data_dir)
    except OSError as exc:
        shutil.rmtree(work, ignore_errors=True)
        raise StoreUnavailable(f"cannot restore {backup} into {data_dir}: {exc}") from exc
    return manifest
