"""Admin and user changes of policy: published as events, answered once the read model shows them, so the caller
(and the next request) reads its own write. Also the small checks of the JSON bodies these routes take."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import HTTPException, Request

from schemas.envelope import Event
from services.core import settle
from services.gateway.deps import state_of


def change_id() -> str:
    """The identity of one admin action: fixed across publish retries, distinct from the same action redone."""
    return uuid.uuid4().hex


async def publish_and_settle(request: Request, event: Event) -> bool:
    """Publish, then wait until the ledger has projected the change or the projection wait passes."""
    state = state_of(request)
    return await settle.publish_and_settle(state.broker, event, state.position, state.settings.projection_wait_s)


def field(body: Any, name: str) -> Any:
    """A key of a JSON object body; None when absent or when the body is no object."""
    return body.get(name) if isinstance(body, dict) else None


def text(value: Any) -> str | None:
    """A usable JSON string (Postgres text holds no NUL), else None."""
    return value if isinstance(value, str) and value and "\x00" not in value else None


def integer(value: Any) -> int | None:
    """A JSON integer (booleans are not), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def bad_request(detail: str) -> HTTPException:
    return HTTPException(400, detail)
