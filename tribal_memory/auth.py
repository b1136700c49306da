"""API keys and callers: who is asking, and whose memories they may touch.

A key reads ``tm_<key_id>_<secret>``. Only the SHA-256 of the secret is
stored (the secret is 32 random bytes, so a fast hash is as strong as a slow
one here); the key itself is shown once, when it is created. Every key is
bound to an owner (an agent or user id); an admin key may act for any owner.

Scoping rules, applied by every interface that authenticates (HTTP, MCP over
HTTP): a non-admin caller reads its owner's memories and ``shared`` ones and
writes only those; naming another owner is refused (:class:`Forbidden`), and a
memory id of another owner is answered as unknown (:class:`NotFound`, no
existence leak). With authentication off every request is :data:`OPEN`.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import delete, select

from tribal_memory.db import Database
from tribal_memory.errors import Forbidden, InvalidInput
from tribal_memory.models import SHARED_OWNER
from tribal_memory.tables import ApiKeyRow, utcnow

AuthMode = Literal["off", "required", "auto"]
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


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a request acts for.

    Attributes:
        owner: The owner the caller is bound to (its key's owner); None when
            authentication is off.
        admin: May read and write every owner's memories.
    """

    owner: str | None
    admin: bool

    def scope(self, requested: str | None) -> str | None:
        """The owner to scope a read to, given the owner a request names.

        Returns:
            For an admin (or with authentication off): ``requested`` as is
            (None: every owner). For any other caller: its own owner when
            ``requested`` is None or its own, ``shared`` when it asks for that.

        Raises:
            Forbidden: a non-admin caller named another owner.
        """
        if self.admin:
            return requested
        if requested is None or requested == self.owner:
            return self.owner
        if requested == SHARED_OWNER:
            return SHARED_OWNER
        raise Forbidden(f"this key acts for owner {self.owner!r}, not {requested!r}")

    @property
    def learner(self) -> str | None:
        """The owner whose learned data this caller's searches use and feed.

        A non-admin key learns as its own owner whatever scope it searches (a
        search of only ``shared`` memories is still its own); None for admin
        keys and the open caller: the searched scope (see
        :func:`tribal_memory.learned.learner.scope_of`).
        """
        return None if self.admin else self.owner

    def write_owner(self, requested: str | None) -> str:
        """The owner a new memory gets, given the owner a request names.

        Returns:
            ``requested`` when the caller may write it; when None, the
            caller's own owner (``shared`` with authentication off).

        Raises:
            Forbidden: a non-admin caller named an owner other than its own or ``shared``.
        """
        if requested is None:
            return self.owner or SHARED_OWNER
        if self.admin or requested in (self.owner, SHARED_OWNER):
            return requested
        raise Forbidden(f"this key writes for owner {self.owner!r} or shared, not {requested!r}")

    def require_admin(self, action: str) -> None:
        """Raise :class:`Forbidden` unless the caller is an admin (or auth is off)."""
        if not self.admin:
            raise Forbidden(f"{action} needs an admin key")


OPEN = Caller(owner=None, admin=True)
"""The caller of every request when authentication is off: all owners, like an admin."""


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
