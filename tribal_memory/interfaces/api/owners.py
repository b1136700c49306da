"""Owners: ``DELETE /v1/owners/{owner}`` clears all of an owner's knowledge."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, delete
from litestar.params import FromPath, QueryParameter
from litestar.status_codes import HTTP_200_OK

from tribal_memory.base.models import SHARED_OWNER
from tribal_memory.interfaces.api.auth import CallerDep
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.api.errors import error_responses
from tribal_memory.interfaces.api.knowledge_schemas import OwnerClearedOut


class OwnersController(Controller):
    """Operations on everything one owner holds."""

    path = "/v1/owners"
    tags = ["memories"]

    @delete(
        "/{owner:str}",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 403),
    )
    def clear_owner(
        self,
        owner: FromPath[str],
        service: Service,
        caller: CallerDep,
        confirm: Annotated[
            str | None,
            QueryParameter(description="Required: the owner's name again, to confirm."),
        ] = None,
    ) -> OwnerClearedOut:
        """Delete all of an owner's knowledge: every memory it owns and all that points at them.

        Each memory goes as a single delete takes it (its relations, cache
        entries, weights and anchors too), and the records of the owner's
        documents, and what the owner's own questions taught the learned layer
        (its retrieval events, cache entries, weights, expansions and anchors,
        also those on shared memories). Shared memories stay. A key may clear its own owner; other
        owners and ``shared`` need an admin key. An owner with nothing gives
        zero counts.

        Raises:
            InvalidInput: 400, ``confirm`` missing or not the owner's name
                (nothing is deleted), an invalid owner.
            Forbidden: 403, a non-admin key clearing another owner or ``shared``.
        """
        own = caller.owner is not None and owner == caller.owner and owner != SHARED_OWNER
        if not own:
            caller.require_admin(f"clearing the knowledge of owner {owner!r}")
        cleared = service.clear_owner(owner, confirm=confirm)
        return OwnerClearedOut(
            owner=cleared.owner,
            memories=cleared.memories,
            documents=cleared.documents,
            learned_rows=cleared.learned_rows,
        )
