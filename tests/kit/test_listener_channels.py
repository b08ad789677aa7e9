"""One LISTEN connection serves every channel a process follows (services/kit/listener.py): each notification goes
to the subscribers of its own channel only, however many channels share the connection."""

from __future__ import annotations

import asyncio

import asyncpg

from services.kit.listener import Listener


async def test_each_channel_reaches_its_own_subscribers_over_one_connection(database_url):
    heard: dict[str, list[str]] = {"a": [], "b": [], "b2": []}
    arrived = asyncio.Event()

    def hear(name: str):
        def notified(payload: str) -> None:
            heard[name].append(payload)
            if all(heard.values()):
                arrived.set()
        return notified

    listener = Listener(database_url).subscribe("kb_a", hear("a")).subscribe("kb_b", hear("b"))
    listener.subscribe("kb_b", hear("b2"))
    await listener.start()
    conn = await asyncpg.connect(database_url)
    try:
        listening = await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                        "AND pid <> pg_backend_pid()")
        await conn.execute("SELECT pg_notify('kb_a', '1'), pg_notify('kb_b', '2')")
        await asyncio.wait_for(arrived.wait(), 10)
    finally:
        await conn.close()
        await listener.stop()
    assert listening == 1
    assert heard == {"a": ["1"], "b": ["2"], "b2": ["2"]}
