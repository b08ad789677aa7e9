"""A service rides out a NATS restart at start-up on its own, with no supervisor to start it again.

Seen in tests/integration/test_infrastructure_restart.py on a fresh clone: the scorer was still creating its durable
consumers when NATS restarted; a JetStream request (`add_consumer`) timed out and the exception ended the process.
Real NATS (restarted by the test), real Postgres, FastStream's own start-up path (`consumer_app`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import nats
import pytest
from faststream.nats import NatsRouter

from services.kit.consumer import KitSlot
from services.kit.runtime import consumer_app, durable_consumer
from services.kit.settings import ServiceSettings


class _WhenLogged(logging.Handler):
    """Sets an event when the ride-out logs that it is waiting for NATS: the test restarts NATS only then."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.waiting = asyncio.Event()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        self.waiting.set()


def _service(nats_url: str, database_url: str, subject: str, received: asyncio.Queue, on_started=None):
    router = NatsRouter()

    @router.subscriber(subject, **durable_consumer(f"ride-out-{uuid.uuid4().hex[:8]}", workers=1))
    async def handle(body: str) -> None:
        await received.put(body)

    settings = ServiceSettings(nats_url=nats_url, database_url=database_url)
    return consumer_app("ride-out", router, KitSlot(None), settings, on_started=on_started)


async def _publish(nats_url: str, subject: str, body: bytes) -> None:
    client = await nats.connect(nats_url)
    try:
        await client.jetstream().publish(subject, body)
    finally:
        await client.close()


async def _start_through_outage(app, nats_server, watcher: _WhenLogged) -> None:
    starting = asyncio.create_task(app.start())
    waited = asyncio.create_task(watcher.waiting.wait())
    done, _ = await asyncio.wait({starting, waited}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if starting in done:
        waited.cancel()
        starting.result()  # raises what ended the start-up
        raise AssertionError("the service started although NATS was away")
    assert waited in done, "the service neither started nor said it was waiting for NATS"
    await asyncio.to_thread(nats_server.start)
    await asyncio.wait_for(starting, 60)


async def _receives(app, nats_url: str, subject: str, received: asyncio.Queue) -> None:
    try:
        await _publish(nats_url, subject, b"\"after the outage\"")
        assert await asyncio.wait_for(received.get(), 30) == "after the outage"
    finally:
        await app.stop()


@pytest.mark.slow
async def test_nats_restarting_while_the_consumers_are_created_does_not_end_the_service(nats_server, database_url):
    watcher = _WhenLogged()
    logging.getLogger("kernelbot.ride_out").addHandler(watcher)
    try:
        received: asyncio.Queue = asyncio.Queue()
        subject = f"evt.rideout.{uuid.uuid4().hex[:8]}"

        async def nats_goes_away(_kit) -> None:  # connected, streams declared; the subscriptions come next
            await asyncio.to_thread(nats_server.stop)

        app = _service(nats_server.url, database_url, subject, received, on_started=nats_goes_away)

        await _start_through_outage(app, nats_server, watcher)

        assert any("subscribing" in message for message in watcher.messages), watcher.messages
        await _receives(app, nats_server.url, subject, received)
    finally:
        logging.getLogger("kernelbot.ride_out").removeHandler(watcher)
