"""SQLAlchemy engine and sessions over SQLite (WAL), and Alembic migrations.

Every connection sets ``journal_mode=WAL``, ``busy_timeout`` and
``foreign_keys=ON``. The schema is created and upgraded only by the Alembic
migrations in ``migrations/`` (shipped in the wheel as
``tribal_memory/_migrations``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from tribal_memory.errors import StoreUnavailable


def migrations_dir() -> Path:
    """Location of the Alembic scripts (installed wheel or source checkout).

    Raises:
        StoreUnavailable: neither location exists (a broken install).
    """
    package = Path(__file__).resolve().parent
    for candidate in (package / "_migrations", package.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise StoreUnavailable("Alembic migrations not found; reinstall tribal-memory")


def make_engine(sqlite_path: Path, *, busy_timeout_ms: int = 5000) -> Engine:
    """An engine for the SQLite file at ``sqlite_path`` with WAL, busy timeout and FKs on."""
    engine = create_engine(
        f"sqlite:///{sqlite_path}",
        connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000},
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


def _alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False))
    return config


def migrate(engine: Engine) -> str | None:
    """Upgrade the database to the newest migration; returns the revision now applied.

    Raises:
        StoreUnavailable: the database cannot be opened or a migration failed.
    """
    config = _alembic_config(engine)
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
        return current_revision(engine)
    except SQLAlchemyError as exc:
        raise StoreUnavailable(f"cannot migrate the database {engine.url}: {exc}") from exc


def current_revision(engine: Engine) -> str | None:
    """The migration revision the database is at (None before the first migration)."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str | None:
    """The newest migration revision shipped with this version."""
    return ScriptDirectory(str(migrations_dir())).get_current_head()


class Database:
    """Engine plus session factory; the one handle to the SQL side.

    Raises:
        StoreUnavailable: from :meth:`session` when a statement fails.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session committed on success and rolled back on any error."""
        session = self._sessions()
        try:
            yield session
            session.commit()
        except SQLAlchemyError as exc:
            session.rollback()
            raise StoreUnavailable(f"database error: {exc}") from exc
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def close(self) -> None:
        """Dispose of pooled connections."""
        self.engine.dispose()
