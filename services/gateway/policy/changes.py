"""Admin and user changes of policy: published as events, answered once the read model shows them, so the caller
(and the next request) reads its own write. The JSON bodies these routes take are read in bodies.py."""

from __future__ import annotations

import uuid

from fastapi import HTTPException, Request

from schemas.envelope import Event
from services.core.infrastructure import settle
from services.gateway.deps import state_of


def change_id() -> str:
    """The identity of one admin action: fixed across publish retries, distinct from the same action redone."""
    return uuid.uuid4().hex


async def publish_and_settle(request: Request, event: Event) -> bool:
    """Publish, then wait until the ledger has projected the change or the projection wait passes."""
    state = state_of(request)
    return await settle.publish_and_settle(state.broker, event, state.position, state.settings.projection_wait_s)


def bad_request(detail: str) -> HTTPException:
    return HTTPException(400, detail)
