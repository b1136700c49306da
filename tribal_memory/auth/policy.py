"""Callers: who a request acts for, and whose memories it may touch.

Scoping rules, applied by every interface that authenticates (HTTP, MCP over
HTTP): a non-admin caller reads its owner's memories and ``shared`` ones and
writes only those; naming another owner is refused (:class:`Forbidden`), and a
memory id of another owner is answered as unknown (:class:`NotFound`, no
existence leak). With authentication off every request is :data:`OPEN`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tribal_memory.base.errors import Forbidden
from tribal_memory.base.models import SHARED_OWNER


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
