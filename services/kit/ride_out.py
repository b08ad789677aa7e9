"""Start-up steps that need NATS wait through an outage instead of ending the service.

A service that starts while NATS restarts (an upgrade, a crash, `kernelbot up` bringing everything up at once) sees
its JetStream requests time out or find no server. Ending the process then leaves it to a supervisor, and a
deployment without one (a plain `kernelbot service X`) stays down. So the steps that talk to NATS at start-up
(connecting, declaring the streams, creating or binding each durable consumer) are retried with a capped backoff.
Every step retried is idempotent: a consumer created twice with the same definition is one consumer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import nats.errors
import nats.js.errors
from faststream.nats import NatsBroker

log = logging.getLogger("kernelbot.ride_out")

T = TypeVar("T")

# What NATS going away looks like from a client: no answer in time, no server, a connection closed or still
# reconnecting, JetStream not ready yet after a restart. An error the server answers (a bad config) is not here: it
# would not heal by waiting.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    asyncio.TimeoutError,  # nats.errors.TimeoutError is one
    nats.errors.NoServersError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.StaleConnectionError,
    nats.errors.NoRespondersError,
    nats.js.errors.ServiceUnavailableError,
    ConnectionError,
)

FIRST_DELAY_S = 0.1
MAX_DELAY_S = 5.0


async def through_outage(step: Callable[[], Awaitable[T]], what: str) -> T:
    """Run `step` until it succeeds, waiting longer between tries while NATS is away (at most MAX_DELAY_S)."""
    delay = FIRST_DELAY_S
    while True:
        try:
            return await step()
        except OUTAGE_ERRORS as exc:
            log.warning("%s: NATS did not answer (%s: %s); trying again in %.1f s",
                        what, type(exc).__name__, exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_DELAY_S)


def patient_subscriptions(broker: NatsBroker) -> None:
    """Make each subscriber's creation of its NATS subscription ride out an outage.

    FastStream starts the subscribers one after the other and gives up at the first error; the subscription it
    creates (a JetStream consumer looked up, created or bound) is the one step there that needs the server.
    """
    for subscriber in broker.subscribers:
        create = subscriber._create_subscription  # type: ignore[attr-defined]  # FastStream's NATS subscriber step
        name = getattr(subscriber, "durable", None) or getattr(subscriber, "subject", "") or repr(subscriber)

        async def patient(create: Callable[[], Awaitable[None]] = create, name: str = str(name)) -> None:
            await through_outage(create, f"subscribing {name}")

        subscriber._create_subscription = patient  # type: ignore[attr-defined]
