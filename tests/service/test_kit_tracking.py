"""The kit's tracking rows on their own: a consumer applies each stream position once, whether a message comes alone
or in a batch, and the positions of one consumer never hide another's. Real Postgres; the messages are plain
stand-ins for JetStream deliveries (subject, data, metadata, ack), as the kit reads them."""

from __future__ import annotations

from types import SimpleNamespace

import asyncpg

from schemas.events import SubmissionDeleted
from services.kit.bus import encode
from services.kit.consumer import Kit

EFFECTS = "CREATE TABLE IF NOT EXISTS kit_effects (consumer text, submission_id int)"


class _NoRelay:
    """Nothing here emits events, so nothing is relayed."""

    async def publish_now(self, rows) -> None:
        assert not rows


def _delivery(consumer: str, stream_seq: int, submission_id: int, acked: list[int]):
    async def ack() -> None:
        acked.append(stream_seq)

    event = SubmissionDeleted(submission_id=submission_id, user_id="u")
    metadata = SimpleNamespace(consumer=consumer, sequence=SimpleNamespace(stream=stream_seq), num_delivered=1)
    return SimpleNamespace(subject=event.subject, data=encode(event), metadata=metadata, ack=ack)


def _record(consumer: str):
    async def apply(conn: asyncpg.Connection, batch) -> None:
        for _, event in batch:
            await conn.execute("INSERT INTO kit_effects VALUES ($1, $2)", consumer, event.submission_id)
    return apply


async def _effects(pool: asyncpg.Pool, consumer: str) -> list[int]:
    rows = await pool.fetch("SELECT submission_id FROM kit_effects WHERE consumer = $1 ORDER BY 1", consumer)
    return [row["submission_id"] for row in rows]


async def test_one_position_is_applied_once_per_consumer(service_database):
    pool = await asyncpg.create_pool(service_database, min_size=1, max_size=2)
    try:
        await pool.execute(EFFECTS)
        kit = Kit(pool=pool, relay=_NoRelay())  # type: ignore[arg-type]

        async def effect(name: str, submission_id: int):
            return await kit.apply_once(name, 7, lambda conn: _record(name)(conn, [(7, SimpleNamespace(
                submission_id=submission_id))]))

        assert await effect("scorer-a", 1) is True
        assert await effect("scorer-a", 2) is False  # position 7 again: tracked, nothing applied
        assert await effect("scorer-b", 3) is True  # the same position for another consumer is its own
        assert await _effects(pool, "scorer-a") == [1] and await _effects(pool, "scorer-b") == [3]
    finally:
        await pool.close()


async def test_a_batch_applies_only_the_positions_it_has_not_applied_and_acks_them_all(service_database):
    pool = await asyncpg.create_pool(service_database, min_size=1, max_size=2)
    try:
        await pool.execute(EFFECTS)
        kit = Kit(pool=pool, relay=_NoRelay())  # type: ignore[arg-type]
        acked: list[int] = []

        await kit.handle_batch(_record("ledger"), [_delivery("ledger", seq, seq * 10, acked) for seq in (1, 2)])
        # redelivered after a lost ack, with a new message behind them
        await kit.handle_batch(_record("ledger"), [_delivery("ledger", seq, seq * 10, acked) for seq in (1, 2, 3)])

        assert await _effects(pool, "ledger") == [10, 20, 30]
        assert acked == [1, 2, 1, 2, 3]
    finally:
        await pool.close()
