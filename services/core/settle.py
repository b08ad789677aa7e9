"""Read your own write: after publishing a change, wait (bounded) until the read model shows it.

The front ends publish events and answer once the ledger has projected them, so the caller and its next request see
the change. The wait is bounded: the events are durable either way, and a slow pipeline gets an answer in time.
One polling loop for every such wait of the gateway and the bot. (A submission's own changes are announced by the
ledger on a Postgres channel instead: services.gateway.waiter.ProjectionWaiter.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from faststream.nats import NatsBroker

from schemas.envelope import Event
from services.kit.bus import publish

POLL_S = 0.02
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


async def publish_and_settle(broker: NatsBroker, events: Event | Sequence[Event],
                             shown: Callable[[], Awaitable[bool]], timeout_s: float) -> bool:
    """Publish the events in order, then wait until `shown()` holds; False when the wait ran out."""
    for event in [events] if isinstance(events, Event) else events:
        await publish(broker, event)
    return await until(shown, timeout_s) is not None
