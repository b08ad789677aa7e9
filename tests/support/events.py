"""Reading the event log back in tests: the archive the ledger keeps, and raw stream messages."""

from __future__ import annotations

import asyncio

import asyncpg

from schemas.streams import DEAD_LETTERS, EVENTS


def archived(database_url: str, event_type: str, correlation_id: str | None = None) -> list[dict]:
    async def fetch():
        conn = await asyncpg.connect(database_url)
        try:
            rows = await conn.fetch(
                "SELECT payload::text AS payload FROM event_archive WHERE event_type = $1 "
                "AND ($2::text IS NULL OR correlation_id = $2) ORDER BY stream_seq",
                event_type, correlation_id,
            )
        finally:
            await conn.close()
        import json

        return [json.loads(r["payload"]) for r in rows]

    return asyncio.run(fetch())


def query(database_url: str, sql: str, *args) -> list[dict]:
    async def fetch():
        conn = await asyncpg.connect(database_url)
        try:
            return [dict(r) for r in await conn.fetch(sql, *args)]
        finally:
            await conn.close()

    return asyncio.run(fetch())


def dead_letters(nats_url: str) -> list[tuple[str, dict, bytes]]:
    async def fetch():
        import nats


        client = await nats.connect(nats_url)
        try:
            js = client.jetstream()
            try:
                info = await js.stream_info(DEAD_LETTERS.name)
            except Exception:  # noqa: BLE001 - not declared means empty
                return []
            found = []
            if info.state.messages == 0:
                return found
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                msg = await js.get_msg(DEAD_LETTERS.name, seq)
                found.append((msg.subject, dict(msg.headers or {}), msg.data))
            return found
        finally:
            await client.close()

    return asyncio.run(fetch())


def publish_raw(nats_url: str, subject: str, data: bytes, headers: dict | None = None) -> None:
    async def send():
        import nats


        client = await nats.connect(nats_url)
        try:
            await client.jetstream().publish(subject, data, headers=headers, stream=EVENTS.name)
        finally:
            await client.close()

    asyncio.run(send())


async def delete_all_streams(url: str) -> None:
    """Empty a shared NATS between tests; KV buckets and object stores are streams too, so they go as well."""
    import nats

    client = await nats.connect(url, connect_timeout=5, allow_reconnect=False, max_reconnect_attempts=0)
    try:
        js = client.jetstream()
        for info in await js.streams_info():
            await js.delete_stream(info.config.name)
    finally:
        await client.close()
