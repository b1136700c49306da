"""SQLAlchemy engine and sessions (SQLite or PostgreSQL), Alembic migrations, shared locks.

Without ``database_url`` the SQL side is the SQLite file ``tribal.sqlite3`` in
the data dir: every connection sets ``journal_mode=WAL``, ``busy_timeout``
and ``foreign_keys=ON``. With a ``postgresql://`` (or
``postgresql+psycopg://``) URL it is that PostgreSQL database, through
psycopg 3 (the ``postgres`` extra), with every session in UTC; several server
processes may then share it (see :class:`SharedLock`). The schema is created
and upgraded only by the Alembic migrations in ``migrations/`` (shipped in the
wheel as ``tribal_memory/_migrations``), the same ones on both databases.

A database URL may hold a password: messages name a database with
:func:`describe_url`, which hides it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import (
    URL,
    Connection,
    Engine,
    create_engine,
    event,
    make_url,
    text,
)
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from tribal_memory.base.errors import StoreUnavailable
from tribal_memory.base.sql import read_changes, read_generations

if TYPE_CHECKING:
    from tribal_memory.base.config import Settings

POSTGRES_DRIVER = "postgresql+psycopg"
LOCK_TIMEOUT_S = 60.0
"""Longest wait for a lock another server process holds (PostgreSQL), in seconds."""
_CONNECT_TIMEOUT_S = 10
_LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL's SQLSTATE for lock_timeout
_URL_EXAMPLE = "postgresql+psycopg://user:password@host:5432/dbname"


def migrations_dir() -> Path:
    """Location of the Alembic scripts (installed wheel or source checkout).

    Raises:
        StoreUnavailable: neither location exists (a broken install).
    """
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_migrations", package.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise StoreUnavailable("Alembic migrations not found; reinstall tribal-memory")


def describe_url(url: URL | str) -> str:
    """A database URL fit for messages and logs: the password replaced by ``***``."""
    if isinstance(url, str):
        try:
            url = make_url(url)
        except ArgumentError:
            return "(an unparsable database URL)"
    return url.render_as_string(hide_password=True)


def error_text(exc: BaseException) -> str:
    """One line describing a database error (the driver's message, no SQL, no parameters)."""
    cause = getattr(exc, "orig", None) or exc
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    return lines[0] if lines else type(cause).__name__


def _postgres_url(url: URL) -> URL:
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername=POSTGRES_DRIVER)
    if url.drivername != POSTGRES_DRIVER:
        raise StoreUnavailable(
            f"database driver {url.drivername!r} is not supported; use {POSTGRES_DRIVER}://"
        )
    if importlib.util.find_spec("psycopg") is None:
        raise StoreUnavailable(
            "a PostgreSQL database_url needs psycopg: pip install 'tribal-memory[postgres]'"
        )
    return url


def make_engine(target: Path | str | URL, *, busy_timeout_ms: int = 5000) -> Engine:
    """An engine for a SQLite file (a ``Path``) or a database URL (SQLite or PostgreSQL).

    SQLite connections get WAL, the busy timeout and foreign keys; PostgreSQL
    connections (psycopg 3; ``postgresql://`` means ``postgresql+psycopg://``)
    get a connect timeout of 10 s, the session time zone UTC and a liveness
    check when taken from the pool. Nothing is connected yet: an unreachable
    server shows in :func:`migrate` or the first session.

    Raises:
        StoreUnavailable: an unparsable URL, a database other than SQLite or
            PostgreSQL, or PostgreSQL without psycopg installed. The message
            never holds the password.
    """
    if isinstance(target, Path):
        url = URL.create("sqlite", database=str(target))
    else:
        try:
            url = make_url(target)
        except ArgumentError as exc:
            raise StoreUnavailable(
                f"the database URL (TRIBAL_DATABASE_URL) cannot be parsed; expected e.g. "
                f"{_URL_EXAMPLE}"
            ) from exc
    backend = url.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(url, busy_timeout_ms)
    if backend in ("postgresql", "postgres"):
        url = _postgres_url(url)
        connect_args: dict[str, Any] = {"connect_timeout": _CONNECT_TIMEOUT_S}
        if "options" not in url.query:
            connect_args["options"] = "-c timezone=UTC"
        return create_engine(url, pool_pre_ping=True, connect_args=connect_args)
    raise StoreUnavailable(
        f"database {describe_url(url)} is not supported: use SQLite (the default) or "
        f"PostgreSQL ({_URL_EXAMPLE})"
    )


def _sqlite_engine(url: URL, busy_timeout_ms: int) -> Engine:
    engine = create_engine(
        url, connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000}
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    return engine


def engine_for(settings: Settings) -> Engine:
    """The engine of an instance: ``settings.database_url``, else its SQLite file.

    Raises:
        StoreUnavailable: as :func:`make_engine`.
    """
    if settings.database_url is not None:
        return make_engine(settings.database_url, busy_timeout_ms=settings.sqlite_busy_timeout_ms)
    return make_engine(settings.sqlite_path, busy_timeout_ms=settings.sqlite_busy_timeout_ms)


def database_label(settings: Settings) -> str:
    """How messages name the SQL database: the SQLite path, or the URL without its password."""
    if settings.database_url is None:
        return str(settings.sqlite_path)
    return describe_url(settings.database_url)


def is_shared(engine: Engine) -> bool:
    """Whether several server processes may use this database (PostgreSQL: yes)."""
    return engine.dialect.name == "postgresql"


def _alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    # Only used for offline SQL; configparser reads "%" as interpolation.
    rendered = engine.url.render_as_string(hide_password=False).replace("%", "%%")
    config.set_main_option("sqlalchemy.url", rendered)
    return config


def migrate(engine: Engine) -> str | None:
    """Upgrade the database to the newest migration; returns the revision now applied.

    On PostgreSQL the upgrade runs in one transaction under an advisory lock,
    so server processes starting together migrate one after the other.

    Raises:
        StoreUnavailable: the database cannot be reached or a migration failed
            (one line, without the password).
    """
    config = _alembic_config(engine)
    try:
        with engine.begin() as connection:
            if is_shared(engine):
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key("migrate")}
                )
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
        return current_revision(engine)
    except SQLAlchemyError as exc:
        raise StoreUnavailable(
            f"cannot migrate the database {describe_url(engine.url)}: {error_text(exc)}"
        ) from exc


def create_sqlite_dir(settings: Settings) -> None:
    """Create the data dir when the SQL database is its SQLite file (no-op for a URL).

    Raises:
        StoreUnavailable: the directory cannot be created.
    """
    if settings.database_url is not None:
        return
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreUnavailable(f"cannot create data dir {settings.data_dir}: {exc}") from exc


def migrate_database(settings: Settings) -> str | None:
    """Create or upgrade the SQL schema of ``settings``' database; returns the revision applied.

    Only the SQL database is opened (no store, no model).

    Raises:
        StoreUnavailable: as :func:`create_sqlite_dir`, :func:`make_engine` and :func:`migrate`.
    """
    create_sqlite_dir(settings)
    engine = engine_for(settings)
    try:
        return migrate(engine)
    finally:
        engine.dispose()


def current_revision(engine: Engine) -> str | None:
    """The migration revision the database is at (None before the first migration).

    Raises:
        StoreUnavailable: the database cannot be reached.
    """
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    except SQLAlchemyError as exc:
        raise StoreUnavailable(
            f"cannot read the database {describe_url(engine.url)}: {error_text(exc)}"
        ) from exc


def head_revision() -> str | None:
    """The newest migration revision shipped with this version."""
    return ScriptDirectory(str(migrations_dir())).get_current_head()


def lock_key(name: str) -> int:
    """A signed 64-bit PostgreSQL advisory-lock key for a lock name (stable across processes)."""
    digest = hashlib.sha256(f"tribal-memory:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class SharedLock:
    """A re-entrant lock over this process's threads and, on PostgreSQL, every process.

    On SQLite it is a ``threading.RLock``. On PostgreSQL the outermost holder
    in a process also takes a session-level advisory lock (``pg_advisory_lock``)
    on a connection of its own, so a check-then-write made under the lock (does
    the memory still exist? is this content stored yet?) cannot interleave with
    the same kind of write in another server process. Other processes may have
    written just before: ``on_acquire`` runs after the lock is taken (the
    service refreshes its LanceDB view there).

    Args:
        engine: The database engine.
        name: What the lock guards; processes agree on the key by this name.
        on_acquire: Called once the lock is held across processes (PostgreSQL only).
        timeout_s: Longest wait for another process's hold, in seconds.

    Raises:
        StoreUnavailable: on entry, the lock could not be taken within
            ``timeout_s`` or the database is unreachable (nothing is held then).
    """

    def __init__(
        self,
        engine: Engine,
        name: str,
        *,
        on_acquire: Callable[[], None] | None = None,
        timeout_s: float = LOCK_TIMEOUT_S,
    ) -> None:
        self.name = name
        self._engine = engine if is_shared(engine) else None
        self._on_acquire = on_acquire
        self._timeout_ms = max(1, int(timeout_s * 1000))
        self._key = lock_key(name)
        self._local = threading.RLock()
        self._depth = 0
        self._connection: Connection | None = None

    def __enter__(self) -> SharedLock:
        self._local.acquire()
        if self._depth == 0:
            try:
                self._acquire_shared()
            except BaseException:
                self._local.release()
                raise
        self._depth += 1
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._depth -= 1
        try:
            if self._depth == 0:
                self._release_shared()
        finally:
            self._local.release()

    def _acquire_shared(self) -> None:
        if self._engine is None:
            return
        connection: Connection | None = None
        try:
            connection = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            connection.execute(text(f"SET lock_timeout = {self._timeout_ms}"))
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": self._key})
            connection.execute(text("RESET lock_timeout"))
        except SQLAlchemyError as exc:
            if connection is not None:
                connection.invalidate()
                connection.close()
            if getattr(getattr(exc, "orig", None), "sqlstate", None) == _LOCK_NOT_AVAILABLE:
                raise StoreUnavailable(
                    f"another server process held the {self.name} lock for over "
                    f"{self._timeout_ms / 1000:g} s"
                ) from exc
            raise StoreUnavailable(
                f"cannot use the database {describe_url(self._engine.url)}: {error_text(exc)}"
            ) from exc
        self._connection = connection
        if self._on_acquire is not None:
            try:
                self._on_acquire()
            except BaseException:
                self._release_shared()
                raise

    def _release_shared(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": self._key})
        except SQLAlchemyError:
            # The session is gone, and PostgreSQL released its locks with it.
            connection.invalidate()
        finally:
            connection.close()


_KEPT_CHANGE_STEPS = 64
"""Change-log answers :meth:`Database.changes` keeps (all are forgotten past that)."""


class Database:
    """Engine plus session factory; the one handle to the SQL side.

    Raises:
        StoreUnavailable: from :meth:`session` when a statement fails.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._changes: dict[tuple[str, int, int], frozenset[str]] = {}
        """(counter, since, until) -> the items the change log names (see :meth:`changes`)."""
        self._changes_lock = threading.Lock()
        self._watch = CommitWatch.of(engine)
        self._generations: dict[tuple[str, ...], tuple[int, dict[str, int]]] = {}
        """names -> (the watch's reading when they were read, the counters)."""
        self._generations_lock = threading.Lock()

    def generations(self, names: Sequence[str]) -> dict[str, int]:
        """:func:`~tribal_memory.base.sql.read_generations` of ``names``, read only when needed.

        On a SQLite file, the counters read last for the same names are
        answered again while no connection of any process committed to the
        database since (:class:`CommitWatch`); every search reads the
        counters, and a read through SQLAlchemy cost 0.13 ms in-process
        (about 0.3 ms inside a busy server) against 4 us for the watch. On
        PostgreSQL, and when the watch fails, they are read every time.

        Raises:
            StoreUnavailable: the read failed.
        """
        key = tuple(names)
        seen = self._watch.reading() if self._watch is not None else None
        if seen is not None:
            with self._generations_lock:
                kept = self._generations.get(key)
            if kept is not None and kept[0] == seen:
                return dict(kept[1])
        with self.reading() as connection:
            found = read_generations(connection, names)
        if seen is not None:
            with self._generations_lock:
                if len(self._generations) >= _KEPT_CHANGE_STEPS:
                    self._generations.clear()
                self._generations[key] = (seen, found)
        return dict(found)

    def changes(
        self, connection: Connection | Session, name: str, since: int, until: int
    ) -> set[str] | None:
        """:func:`~tribal_memory.base.sql.read_changes`, each answer read once.

        The log of a counter's step from ``since`` to ``until`` never changes
        once the counter reached ``until``, and the in-memory indexes that
        follow one counter (past queries, feedback weights, expansion words)
        all ask for the same step after a feedback: the first reads it, the
        others reuse it. A few recent steps are kept.
        """
        key = (name, since, until)
        with self._changes_lock:
            known = self._changes.get(key)
        if known is not None:
            return set(known)
        found = read_changes(connection, name, since, until)
        if found is not None:
            with self._changes_lock:
                if len(self._changes) >= _KEPT_CHANGE_STEPS:
                    self._changes.clear()
                self._changes[key] = frozenset(found)
        return found

    @property
    def shared(self) -> bool:
        """Whether other server processes may write this database at the same time."""
        return is_shared(self.engine)

    def lock(self, name: str, *, on_acquire: Callable[[], None] | None = None) -> SharedLock:
        """A new :class:`SharedLock` called ``name`` on this database."""
        return SharedLock(self.engine, name, on_acquire=on_acquire)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session committed on success and rolled back on any error."""
        session = self._sessions()
        try:
            yield session
            session.commit()
        except SQLAlchemyError as exc:
            session.rollback()
            raise StoreUnavailable(f"database error: {error_text(exc)}") from exc
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A plain connection for a read on a search's path, without an ORM session.

        A session's setup and commit cost several times a small read itself;
        the connection's transaction is rolled back on exit.

        Raises:
            StoreUnavailable: on any database error.
        """
        try:
            with self.engine.connect() as connection:
                yield connection
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"database error: {error_text(exc)}") from exc

    def close(self) -> None:
        """Dispose of pooled connections (and the commit watch's own)."""
        if self._watch is not None:
            self._watch.close()
        self.engine.dispose()


class CommitWatch:
    """Whether any connection has committed to a SQLite database file since a reading.

    SQLite's ``PRAGMA data_version`` (https://sqlite.org/pragma.html#pragma_data_version)
    on a connection of its own that never writes: its value changes whenever
    another connection, of this process or another, commits. The
    ``learned_generations`` counters change only in committed transactions,
    so while the reading is the same, counters read after it are still
    current. Read the watch before what it guards, never after.
    """

    def __init__(self, path: str) -> None:
        self._connection = sqlite3.connect(path, check_same_thread=False)
        self._lock = threading.Lock()

    @classmethod
    def of(cls, engine: Engine) -> CommitWatch | None:
        """A watch of ``engine``'s SQLite file; None for PostgreSQL or an in-memory database."""
        database = engine.url.database
        if engine.dialect.name != "sqlite" or not database or database == ":memory:":
            return None
        if database.startswith("file:") or engine.url.query:
            return None  # URI forms (maybe in memory): not watched
        try:
            return cls(database)
        except sqlite3.Error:
            return None

    def reading(self) -> int | None:
        """The current ``data_version``; None when it cannot be read (read what it guards)."""
        try:
            with self._lock:
                # fetchall runs the statement to its end: no read transaction stays open
                (row,) = self._connection.execute("PRAGMA data_version").fetchall()
                return int(row[0])
        except sqlite3.Error:
            return None

    def close(self) -> None:
        """Close the watch's connection."""
        with self._lock:
            self._connection.close()
