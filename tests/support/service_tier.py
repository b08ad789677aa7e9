"""The service tier: one service's handlers driven through FastStream's `TestNatsBroker`, in one process.

What stays real: the handlers, the kit's exactly-once tracking and outbox, the SQL, and a Postgres database cloned
from a migrated template (cloning takes milliseconds; migrating takes seconds). What is replaced: JetStream, at the
one port the kit publishes through (`OutboxRelay`'s `js.publish`). `MemoryStream` plays the stream: each message gets
the next stream sequence, a repeated `Nats-Msg-Id` is dropped as the duplicate window drops it, and delivery carries
a JetStream ack subject, so the kit reads a real (consumer, stream sequence) position from it.

What this tier cannot show (acks, redelivery after a crash, the real duplicate window, consumer start-up) stays with
the tests that start real servers (tests/integration, tests/e2e).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from faststream.nats import NatsBroker, NatsRouter, TestNatsBroker
from nats.js.api import PubAck

from schemas.envelope import Event
from schemas.streams import EVENTS
from services.kit.bus import MSG_ID_HEADER, decode, encode
from services.kit.consumer import Kit, KitSlot
from services.kit.db import create_pool
from services.kit.deadletter import DeadLetterMiddleware
from services.kit.outbox import OutboxRelay


@dataclass(frozen=True)
class StoredMessage:
    sequence: int
    subject: str
    message_id: str
    payload: bytes

    def event(self) -> Event:
        return decode(self.subject, self.payload)


class MemoryStream:
    """The EVENTS stream at the outbox's port: sequences, the duplicate window and delivery order."""

    def __init__(self) -> None:
        self.messages: list[StoredMessage] = []
        # JetStream drops a message id seen within the stream's duplicate window, counted from when it was stored,
        # and stores it again after that. A stream that never forgot hid a scorer judging a submission twice.
        self._stored_at: dict[str, float] = {}
        self._now = 0.0  # the stream's clock, in seconds: moved only by pass_time, never by the wall clock
        self._undelivered: deque[StoredMessage] = deque()

    def pass_time(self, seconds: float) -> None:
        """Let time pass, as for a message published again after the duplicate window (EVENTS: 300 s)."""
        self._now += seconds

    async def publish(self, subject: str, payload: bytes, headers: dict[str, str] | None = None,
                      stream: str | None = None, **_: object) -> PubAck:
        message_id = (headers or {}).get(MSG_ID_HEADER, "")
        stored_at = self._stored_at.get(message_id)
        if message_id and stored_at is not None and self._now - stored_at < EVENTS.duplicate_window_s:
            return PubAck(stream=stream or EVENTS.name, seq=self.messages[-1].sequence, duplicate=True)
        stored = StoredMessage(len(self.messages) + 1, subject, message_id, payload)
        self._stored_at[message_id] = self._now
        self.messages.append(stored)
        self._undelivered.append(stored)
        return PubAck(stream=stream or EVENTS.name, seq=stored.sequence)

    def next_undelivered(self) -> StoredMessage | None:
        return self._undelivered.popleft() if self._undelivered else None


def ack_subject(consumer: str, sequence: int) -> str:
    """A JetStream ack reply subject: nats-py reads a message's metadata (consumer, stream sequence) from it.

    The consumer named is the service's: its handlers listen on distinct subjects, so (consumer, sequence) is as
    unique per delivery as (durable, sequence) is on the real stream."""
    return f"$JS.ACK.{EVENTS.name}.{consumer}.1.{sequence}.{sequence}.{time.time_ns()}.0"


class ServiceBus:
    """Publish facts into the service, deliver them in stream order, and read back what the service emitted."""

    def __init__(self, brokers: dict[str, NatsBroker], stream: MemoryStream) -> None:
        self._brokers = brokers  # one per service, as each service is its own process
        self.stream = stream

    async def publish(self, *events: Event) -> None:
        """Publish as a front end or another service would; delivered by `settle`."""
        for event in events:
            await self.stream.publish(event.subject, encode(event), {MSG_ID_HEADER: event.message_id})

    async def redeliver(self, event: Event, sequence: int) -> None:
        """Deliver a message again at the stream position it was stored at, as JetStream does after a lost ack."""
        await self._deliver(StoredMessage(sequence, event.subject, event.message_id, encode(event)))

    async def settle(self, limit: int = 1000) -> None:
        """Deliver every stored message in order, including those the handlers emit meanwhile."""
        for _ in range(limit):
            message = self.stream.next_undelivered()
            if message is None:
                return
            await self._deliver(message)
        raise AssertionError(f"still delivering after {limit} messages: a handler loop?")

    async def _deliver(self, message: StoredMessage) -> None:
        for service, broker in self._brokers.items():
            await broker.publish(message.payload, message.subject, headers={MSG_ID_HEADER: message.message_id},
                                 reply_to=ack_subject(service, message.sequence))

    def emitted(self, kind: type[Event]) -> list:
        return [m.event() for m in self.stream.messages if m.subject == kind.subject
                and type(m.event()) is kind]


@asynccontextmanager
async def running_services(database_url: str, **services: tuple[NatsRouter, KitSlot]) -> AsyncIterator[ServiceBus]:
    """Each named service's router on its own TestNatsBroker, its kit on the database, all on one MemoryStream."""
    stream = MemoryStream()
    async with AsyncExitStack() as stack:
        brokers = {}
        for name, (router, slot) in services.items():
            broker = NatsBroker(middlewares=(DeadLetterMiddleware,))
            broker.include_router(router)
            pool = await create_pool(database_url, 4)
            stack.push_async_callback(pool.close)
            kit = Kit(pool=pool, relay=OutboxRelay(pool, stream))  # type: ignore[arg-type] - the stream is the port
            slot.fill(kit)
            stack.callback(slot.fill, None)
            stack.push_async_callback(kit.relay.stop)
            brokers[name] = await stack.enter_async_context(TestNatsBroker(broker))
        yield ServiceBus(brokers, stream)


def running_service(router: NatsRouter, slot: KitSlot, database_url: str):
    """One service alone."""
    return running_services(database_url, service=(router, slot))
