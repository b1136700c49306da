"""The learned layer: usage feedback, memory anchors and A/B variant pins.

``POST /v1/feedback`` reports which hits of a logged retrieval (``feedback:
true`` on ``/v1/recall`` or ``/v1/search``) were used; anchors live under
``/v1/memories/{memory_id}/anchors``; ``/v1/variants/{owner}`` pins an owner
to the ``learned`` or ``baseline`` variant.
"""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, delete, get, post, put
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_204_NO_CONTENT

from tribal_memory.auth.policy import Caller
from tribal_memory.base.errors import Forbidden
from tribal_memory.base.models import SHARED_OWNER
from tribal_memory.interfaces.api.auth import CallerDep, OwnerScope
from tribal_memory.interfaces.api.convert import anchor_out, feedback_out
from tribal_memory.interfaces.api.deps import Service
from tribal_memory.interfaces.api.errors import error_responses
from tribal_memory.interfaces.api.learned_schemas import (
    AnchorOut,
    AnchorRequest,
    AnchorsOut,
    FeedbackOut,
    FeedbackRequest,
    VariantOut,
    VariantRequest,
)


class FeedbackController(Controller):
    """Usage feedback on logged retrievals."""

    path = "/v1/feedback"
    tags = ["learned"]

    @post(
        "/",
        sync_to_thread=True,
        status_code=HTTP_200_OK,
        responses=error_responses(400, 404, 409),
    )
    def feedback(
        self, data: JSONBody[FeedbackRequest], service: Service, caller: CallerDep
    ) -> FeedbackOut:
        """Report which memories of a retrieval were used (``used_ids: []``: none).

        Used (query, memory) pairs are reinforced and the others penalised; a
        query whose answers keep being used is then served from the cache.
        Sending the same feedback again changes nothing (``duplicate: true``).

        Raises:
            NotFound: 404, unknown ``retrieval_id`` (or another ``owner``'s).
            InvalidInput: 400, a used id that was not among the retrieval's hits.
            Conflict: 409, the retrieval already has feedback with other ids.
            Forbidden: 403, a non-admin key named another ``owner``.
        """
        scope = caller.scope(data.owner)
        owner = caller.learner if caller.learner is not None else scope
        result = service.record_usage_feedback(data.retrieval_id, data.used_ids, owner=owner)
        return feedback_out(result)


class AnchorsController(Controller):
    """Anchors: questions attached to a memory so that the memory is found by them."""

    path = "/v1/memories/{memory_id:str}/anchors"
    tags = ["learned"]

    @get("/", sync_to_thread=True, responses=error_responses(404))
    def anchors(
        self, memory_id: FromPath[str], service: Service, owner_scope: OwnerScope
    ) -> AnchorsOut:
        """Anchors of the memory, active and pending, most used first (empty: none).

        Raises:
            NotFound: 404, no such memory visible to ``owner``.
        """
        found = service.anchors(memory_id, owner=owner_scope)
        return AnchorsOut(anchors=[anchor_out(anchor) for anchor in found])

    @post(
        "/",
        sync_to_thread=True,
        status_code=HTTP_201_CREATED,
        responses=error_responses(400, 404),
    )
    def add_anchor(
        self,
        memory_id: FromPath[str],
        data: JSONBody[AnchorRequest],
        service: Service,
        owner_scope: OwnerScope,
        caller: CallerDep,
    ) -> AnchorOut:
        """Attach a manual anchor (active at once, confidence 1.0); idempotent.

        On a shared memory, a non-admin key's anchor is its owner's: it steers
        only that owner's searches. An admin key's steers everyone's.

        Raises:
            NotFound: 404, no such memory visible to ``owner``.
            InvalidInput: 400, text empty, without content words or over 1024 characters.
        """
        return anchor_out(
            service.add_anchor(memory_id, data.text, owner=owner_scope, for_owner=caller.learner)
        )

    @delete(
        "/",
        sync_to_thread=True,
        status_code=HTTP_204_NO_CONTENT,
        responses=error_responses(400, 404),
    )
    def remove_anchor(
        self,
        memory_id: FromPath[str],
        text: Annotated[str, QueryParameter(description="The anchor's text.")],
        service: Service,
        owner_scope: OwnerScope,
        caller: CallerDep,
    ) -> None:
        """Detach the anchor with this ``text`` from the memory (204).

        A non-admin key detaches only its owner's anchors.

        Raises:
            NotFound: 404, no such memory visible to ``owner``, or no such anchor.
            ValidationException: 400, no ``text`` query parameter.
        """
        service.remove_anchor(memory_id, text, owner=owner_scope, for_owner=caller.learner)


def _own_variant(caller: Caller, owner: str) -> str:
    """The owner whose pin ``caller`` may change: its own; any for an admin.

    Raises:
        Forbidden: a non-admin key named another owner, or ``shared`` (the
            variant of searches in that scope, which every owner runs).
    """
    resolved = caller.write_owner(owner)
    if resolved == SHARED_OWNER and not caller.admin:
        raise Forbidden("only an admin key may pin the variant of 'shared'")
    return resolved


class VariantsController(Controller):
    """A/B variants: pin an owner to ``learned`` or ``baseline`` (plain search)."""

    path = "/v1/variants/{owner:str}"
    tags = ["learned"]

    @get("/", sync_to_thread=True, responses=error_responses(403))
    def variant(self, owner: FromPath[str], service: Service, caller: CallerDep) -> VariantOut:
        """The variant serving ``owner``: its pin, else the ``default_variant`` setting.

        Raises:
            Forbidden: 403, a non-admin key asked about another owner.
        """
        owner = caller.write_owner(owner)
        return VariantOut(owner=owner, variant=service.variant_for(owner))

    @put("/", sync_to_thread=True, status_code=HTTP_200_OK, responses=error_responses(400, 403))
    def pin(
        self,
        owner: FromPath[str],
        data: JSONBody[VariantRequest],
        service: Service,
        caller: CallerDep,
    ) -> VariantOut:
        """Pin ``owner`` to a variant; searches with that owner use it unless they name parts.

        Raises:
            InvalidInput: 400, an invalid owner or variant.
            Forbidden: 403, a non-admin key named another owner, or ``shared``.
        """
        owner = _own_variant(caller, owner)
        service.pin_variant(owner, data.variant)
        return VariantOut(owner=owner, variant=service.variant_for(owner))

    @delete(
        "/",
        sync_to_thread=True,
        status_code=HTTP_204_NO_CONTENT,
        responses=error_responses(400, 403),
    )
    def unpin(self, owner: FromPath[str], service: Service, caller: CallerDep) -> None:
        """Remove the owner's pin (204); it gets the default variant again.

        Raises:
            InvalidInput: 400, an invalid owner.
            Forbidden: 403, a non-admin key named another owner, or ``shared``.
        """
        service.pin_variant(_own_variant(caller, owner), None)
