"""Exactly-once effect on an at-least-once bus.

A handler's state change, the tracking rows of the stream sequences it applied, and the events it emits (outbox)
commit in one transaction. A redelivered message finds its tracking row and changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import asyncpg
from nats.aio.msg import Msg

from schemas.envelope import Event
from services.kit import metrics, outbox
from services.kit.bus import decode
from services.kit.deadletter import (
    MAX_DELIVERIES,
    OUTAGE_ATTEMPTS,
    current_message,
    dead_letter,
    is_outage,
    is_poison,
    outage_delay_s,
    retry_delay_of,
    retry_or_dead_letter,
)
from services.kit.outbox import OutboxRelay

TRACK_ONE = "INSERT INTO tracking (consumer, stream_seq) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING 1"
TRACK_MANY = """
INSERT INTO tracking (consumer, stream_seq) SELECT $1, unnest($2::bigint[])
ON CONFLICT DO NOTHING RETURNING stream_seq
"""

HOLD_AT_MOST_S = 5.0
Apply = Callable[[asyncpg.Connection], Awaitable[Sequence[Event] | None]]
# Applies a batch of (stream sequence, event), in stream order, inside the caller's transaction.
ApplyBatch = Callable[[asyncpg.Connection, list[tuple[int, Event]]], Awaitable[Sequence[Event] | None]]


def _one(apply: ApplyBatch, seq: int, event: Event) -> Apply:
    """A batch handler applied to a batch of one event."""
    return lambda conn: apply(conn, [(seq, event)])


Config = TypeVar("Config")


class KitSlot(Generic[Config]):
    """Where a service's handlers find its kit, and the service's typed configuration, once it has started.

    FastStream's `Context()` would do, but it resolves in a worker thread for every message, which cost more CPU
    than the handlers themselves. `config` is the service's own frozen dataclass (what its handlers need from its
    settings), set by its app at start: typed fields, not a string-keyed bag.
    """

    def __init__(self, config: Config) -> None:
        self._kit: Kit | None = None
        self._unstarted = config
        self.config = config

    def fill(self, kit: Kit | None, config: Config | None = None) -> None:
        """Start (a kit, and the config its app chose) or stop (None). Stopping puts back the config the slot was
        made with: a stopped service's settings must not outlive it in the process, where an operator's replay
        reads the environment instead (a scorer started and stopped in a test made a later replay judge by its
        defaults rather than by the platform's settings)."""
        self._kit = kit
        if kit is None:
            self.config = self._unstarted
        elif config is not None:
            self.config = config

    def __call__(self) -> Kit:
        if self._kit is None:
            raise RuntimeError("the service has not started: no kit yet")
        return self._kit


@dataclass
class Kit:
    """What every handler needs: the pool and the outbox relay. Set in the broker context at start-up."""

    pool: asyncpg.Pool
    relay: OutboxRelay

    async def commit(self, apply: Apply) -> None:
        """Run `apply` in a transaction, storing what it emits in the outbox; publish right after commit."""
        async with self.pool.acquire() as conn, conn.transaction():
            events = await apply(conn) or ()
            rows = outbox.rows_of(events)
            if rows:
                await outbox.enqueue(conn, rows)
        metrics.emitted(events)
        await self.relay.publish_now(rows)

    async def apply_once(self, consumer: str, stream_seq: int, apply: Apply) -> bool:
        """Run `apply` in a transaction unless this consumer already applied `stream_seq`; False for a duplicate."""
        applied = False

        async def tracked(conn: asyncpg.Connection) -> Sequence[Event] | None:
            nonlocal applied
            if await conn.fetchval(TRACK_ONE, consumer, stream_seq) is None:
                return None
            applied = True
            return await apply(conn)

        await self.commit(tracked)
        return applied

    async def handle(self, apply: Apply) -> bool:
        """Apply the JetStream message being handled once, then acknowledge it."""
        msg = current_message()
        meta = msg.raw_message.metadata
        applied = await self.apply_once(meta.consumer, meta.sequence.stream, apply)
        await msg.ack()
        return applied

    async def handle_batch(self, apply: ApplyBatch, raws: Sequence[Msg] | None = None) -> None:
        """Apply a batch in stream order in one transaction; on failure fall back to one message at a time.

        Without `raws`, the batch being handled in this task.
        """
        if raws is None:
            raws = current_message().raw_message
        decoded: list[tuple[Msg, Event]] = []
        for raw in raws:
            try:
                decoded.append((raw, decode(raw.subject, raw.data)))
            except Exception as exc:  # noqa: BLE001
                if not is_poison(exc):
                    raise
                await dead_letter(raw, exc)
        if not decoded:
            return
        consumer = decoded[0][0].metadata.consumer
        attempt = 0
        while True:
            attempt += 1
            try:
                emitted = await self._apply_batch(consumer, decoded, apply)
                break
            except Exception as exc:  # noqa: BLE001 - isolate the message at fault, keep the order of the others
                if is_outage(exc) and attempt < OUTAGE_ATTEMPTS:
                    # under the ack wait of ordered consumers, so the held batch is never redelivered meanwhile
                    await self._hold(decoded, min(HOLD_AT_MOST_S, outage_delay_s(attempt)))
                    continue
                await self._apply_one_by_one(consumer, decoded, apply)
                return
        await self.relay.publish_now(emitted)
        for raw, _ in decoded:
            await raw.ack()

    @staticmethod
    async def _hold(decoded: list[tuple[Msg, Event]], delay_s: float) -> None:
        """Keep a batch through a database or broker outage and try it again.

        A nak would free the consumer to deliver later messages first (found by bench/chaos.py: a submission's
        status applied before the submission); held, nothing later is delivered, so stream order survives.
        """
        for raw, _ in decoded:
            try:
                await raw.in_progress()
            except Exception:  # noqa: BLE001 - NATS away too: redelivered in order after ack_wait if it lasts
                break
        await asyncio.sleep(delay_s)

    async def _apply_one_by_one(self, consumer: str, decoded: list[tuple[Msg, Event]], apply: ApplyBatch) -> None:
        for index, (raw, event) in enumerate(decoded):
            seq = raw.metadata.sequence.stream
            try:
                await self.apply_once(consumer, seq, _one(apply, seq, event))
                await raw.ack()
            except Exception as exc:  # noqa: BLE001
                await retry_or_dead_letter(raw, exc)
                if is_poison(exc) or raw.metadata.num_delivered >= MAX_DELIVERIES:
                    continue
                # a transient failure: what follows waits for it, so projections keep stream order; the same delay
                # for all, or a later message delivered fewer times would come back before the failed one
                delay = retry_delay_of(raw, exc)
                for later, _ in decoded[index + 1:]:
                    await later.nak(delay=delay)
                return

    async def _apply_batch(self, consumer: str, decoded: list[tuple[Msg, Event]],
                           apply: ApplyBatch) -> list[outbox.Row]:
        emitted: list[Event] = []
        async with self.pool.acquire() as conn, conn.transaction():
            seqs = [raw.metadata.sequence.stream for raw, _ in decoded]
            fresh = {row["stream_seq"] for row in await conn.fetch(TRACK_MANY, consumer, seqs)}
            batch = [(seq, event) for (_, event), seq in zip(decoded, seqs, strict=True) if seq in fresh]
            if batch:
                emitted.extend(await apply(conn, batch) or ())
            rows = outbox.rows_of(emitted)
            if rows:
                await outbox.enqueue(conn, rows)
        return rows

