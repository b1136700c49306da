"""API keys: created, listed, revoked, and turned back into the owner they stand for.

A key reads ``tm_<key_id>_<secret>``. Only the SHA-256 of the secret is
stored (the secret is 32 random bytes, so a fast hash is as strong as a slow
one here); the key itself is shown once, when it is created. Every key is
bound to an owner (an agent or user id); an admin key may act for any owner.
What a key may then touch is :mod:`tribal_memory.auth.policy`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import delete, select

from tribal_memory.base.db import Database, create_sqlite_dir, engine_for, migrate
from tribal_memory.base.errors import InvalidInput
from tribal_memory.base.tables import ApiKeyRow, utcnow

if TYPE_CHECKING:
    from tribal_memory.base.config import Settings

KEY_PREFIX = "tm_"
_MAX_OWNER_CHARS = 128
_MAX_LABEL_CHARS = 256


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A stored API key (never its secret)."""

    key_id: str
    owner: str
    admin: bool
    label: str
    created_at: datetime


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _key(row: ApiKeyRow) -> ApiKey:
    return ApiKey(row.key_id, row.owner, row.admin, row.label, row.created_at)


class ApiKeys:
    """API keys stored in the ``api_keys`` table (hashes only).

    Args:
        db: The instance's database (SQLite or any SQLAlchemy URL it supports).
    """

    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, owner: str, *, admin: bool = False, label: str = "") -> tuple[ApiKey, str]:
        """Create a key for ``owner``.

        Returns:
            The stored key and the key string ``tm_<key_id>_<secret>``, which
            is not stored anywhere and cannot be shown again.

        Raises:
            InvalidInput: empty or over-long owner or label.
        """
        owner = owner.strip()
        if not owner or len(owner) > _MAX_OWNER_CHARS:
            raise InvalidInput(f"owner must be 1 to {_MAX_OWNER_CHARS} characters")
        if len(label) > _MAX_LABEL_CHARS:
            raise InvalidInput(f"label is longer than {_MAX_LABEL_CHARS} characters")
        key_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        row = ApiKeyRow(
            key_id=key_id,
            owner=owner,
            admin=admin,
            secret_hash=_hash(secret),
            label=label,
            created_at=utcnow(),
        )
        with self._db.session() as session:
            session.add(row)
            key = _key(row)
        return key, f"{KEY_PREFIX}{key_id}_{secret}"

    def authenticate(self, token: str) -> ApiKey | None:
        """The key ``token`` is, or None for a malformed, unknown or revoked key.

        The secret is compared in constant time.
        """
        if not token.startswith(KEY_PREFIX):
            return None
        key_id, _, secret = token[len(KEY_PREFIX) :].partition("_")
        if not key_id or not secret:
            return None
        with self._db.session() as session:
            row = session.get(ApiKeyRow, key_id)
            if row is None or not hmac.compare_digest(row.secret_hash, _hash(secret)):
                return None
            return _key(row)

    def list(self, owner: str | None = None) -> list[ApiKey]:
        """Stored keys (of ``owner``, or all), oldest first."""
        statement = select(ApiKeyRow).order_by(ApiKeyRow.created_at, ApiKeyRow.key_id)
        if owner is not None:
            statement = statement.where(ApiKeyRow.owner == owner)
        with self._db.session() as session:
            return [_key(row) for row in session.scalars(statement)]

    def revoke(self, key_id: str) -> bool:
        """Delete a key; requests with it fail from now on. False when there was none."""
        with self._db.session() as session:
            result = session.execute(delete(ApiKeyRow).where(ApiKeyRow.key_id == key_id))
            return bool(result.rowcount)  # type: ignore[attr-defined]


@contextmanager
def open_api_keys(settings: Settings) -> Iterator[ApiKeys]:
    """The API keys of ``settings``' SQL database, its schema created or upgraded first.

    Opens only the SQL database (no store, no embedding model), so it is quick
    and works while servers use the same database; closed on exit.

    Raises:
        StoreUnavailable: the database cannot be created, reached or migrated.
    """
    create_sqlite_dir(settings)
    db = Database(engine_for(settings))
    try:
        migrate(db.engine)
        yield ApiKeys(db)
    finally:
        db.close()
