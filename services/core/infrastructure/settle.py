"""Read your own write: after publishing a change, wait (bounded) until the read model shows it.

The front ends publish events and answer once the ledger has projected them, so the caller and its next request see
the change. The wait is bounded: the events are durable either way, and a slow pipeline gets an answer in time.
`publish_and_settle` is that wait for every change the ledger projects directly: it waits on the ledger's announced
position (services/core/infrastructure/position.py). `until` remains for the few waits that pass through another
service first, whose stream sequence the waiter cannot know (the scorer's reinstatement of a cleared submission).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from faststream.nats import NatsBroker

from schemas.envelope import Event
from services.core.infrastructure.position import LedgerPosition
from services.kit.bus import publish

POLL_S = 0.02
PROJECTION_WAIT_S = 5.0  # the bot's wait; the gateway's is KB_PROJECTION_WAIT_S
T = TypeVar("T")


async def until(probe: Callable[[], Awaitable[T]], timeout_s: float, poll_s: float = POLL_S) -> T | None:
    """Call `probe` until it returns something truthy and return that; None once `timeout_s` has passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        value = await probe()
        if value:
            return value
        if loop.time() >= deadline:
            return None
        await asyncio.sleep(poll_s)


async def publish_and_settle(broker: NatsBroker, events: Event | Sequence[Event], position: LedgerPosition,
                             timeout_s: float) -> bool:
    """Publish the events in order, then wait until the ledger has applied the last; False when the wait ran out."""
    last = 0
    for event in [events] if isinstance(events, Event) else events:
        last = max(last, await publish(broker, event))
    return await position.reached(last, timeout_s)
