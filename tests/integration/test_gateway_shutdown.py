"""A gateway stopped while NATS is away still lets go of everything it holds: its database connections above all,
which a stopped replica would otherwise keep open until Postgres has none left to give."""

from __future__ import annotations

import asyncio

import asyncpg

from services.gateway.app import create_app
from services.gateway.settings import GatewaySettings


async def other_sessions(database_url: str) -> int:
    connection = await asyncpg.connect(database_url)
    try:
        return await connection.fetchval("SELECT count(*) FROM pg_stat_activity "
                                         "WHERE datname = current_database() AND pid <> pg_backend_pid()")
    finally:
        await connection.close()


async def test_a_gateway_stopped_while_nats_is_down_closes_its_database_pool(nats_server, database_url):
    app = create_app(GatewaySettings(nats_url=nats_server.url, database_url=database_url))
    async with app.router.lifespan_context(app):
        assert await other_sessions(database_url) > 0
        await asyncio.to_thread(nats_server.stop)  # the broker is reconnecting when the lifespan ends
    assert await other_sessions(database_url) == 0
