"""The embedded servers a fresh machine relies on: started from scratch here, never from env vars."""

from __future__ import annotations

import socket
import uuid

import asyncpg
import nats
import psycopg
import pytest
from nats.js.api import StreamConfig

from services.kit.embedded import (
    DEFAULT_MAX_PAYLOAD,
    create_database,
    database_url,
    drop_database,
    free_port,
    start_nats,
    start_postgres,
)


@pytest.mark.asyncio
async def test_postgres_starts_keeps_data_across_restart_and_hosts_databases(tmp_path):
    with start_postgres(tmp_path / "pg") as pg:
        assert pg.url.startswith("postgresql://")
        conn = await asyncpg.connect(pg.url)
        try:
            assert await conn.fetchval("SELECT 1") == 1
            await conn.execute("CREATE TABLE kept (id int PRIMARY KEY, note text)")
            await conn.execute("INSERT INTO kept VALUES (1, 'survives a restart')")
        finally:
            await conn.close()

        first_pid = pg.pid
        pg.restart()
        assert pg.pid != first_pid

        conn = await asyncpg.connect(pg.url)
        try:
            assert await conn.fetchval("SELECT note FROM kept WHERE id = 1") == "survives a restart"
        finally:
            await conn.close()

        # Migrations go through psycopg (yoyo), so the socket URL must suit libpq as well as asyncpg.
        with psycopg.connect(pg.url) as sync_conn:
            assert sync_conn.execute("SELECT 1").fetchone() == (1,)

        url = create_database(pg.url, "kb_embedded_check")
        assert url == database_url(pg.url, "kb_embedded_check")
        conn = await asyncpg.connect(url)
        try:
            assert await conn.fetchval("SELECT current_database()") == "kb_embedded_check"
            assert await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == 0
            # Dropping must end this still-open session rather than fail on it.
            drop_database(pg.url, "kb_embedded_check")
        finally:
            conn.terminate()  # the server already ended this session; a polite close would hit a dead socket
        admin = await asyncpg.connect(pg.url)
        try:
            assert await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = 'kb_embedded_check'") is None
        finally:
            await admin.close()
    assert not pg.is_running()


@pytest.mark.asyncio
async def test_nats_jetstream_dedups_takes_big_messages_and_keeps_them_across_restart(tmp_path):
    with start_nats(tmp_path / "nats") as server:
        assert server.url.startswith("nats://127.0.0.1:")
        nc = await nats.connect(server.url)
        try:
            assert nc.max_payload == DEFAULT_MAX_PAYLOAD
            js = nc.jetstream()
            await js.add_stream(StreamConfig(name="CHECK", subjects=["check.>"]))

            first = await js.publish("check.a", b"once", headers={"Nats-Msg-Id": "msg-1"})
            again = await js.publish("check.a", b"once", headers={"Nats-Msg-Id": "msg-1"})
            assert not first.duplicate
            assert again.duplicate
            assert again.seq == first.seq

            # A 1 MB submission inside a JSON event is well over NATS's 1 MiB default limit.
            big = await js.publish("check.big", b"x" * (2 * 1024 * 1024))
            assert big.seq == 2
        finally:
            await nc.close()

        port, first_pid = server.port, server.pid
        server.restart()
        assert server.port == port and server.pid != first_pid

        nc = await nats.connect(server.url)
        try:
            js = nc.jetstream()
            info = await js.stream_info("CHECK")
            assert info.state.messages == 2
            msg = await js.get_msg("CHECK", 2)
            assert len(msg.data) == 2 * 1024 * 1024
        finally:
            await nc.close()
    assert not server.is_running()


def test_nats_start_failure_reports_the_log(tmp_path):
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        with pytest.raises(RuntimeError, match="(?i)address already in use"):
            start_nats(tmp_path / "nats", port)


@pytest.mark.asyncio
async def test_fixtures_give_an_empty_database_and_a_clean_jetstream(database_url, nats_url):
    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == 0
    finally:
        await conn.close()

    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        assert await js.streams_info() == []
        name = f"FIXTURE_{uuid.uuid4().hex[:8].upper()}"
        await js.add_stream(StreamConfig(name=name, subjects=[f"{name.lower()}.>"]))
    finally:
        await nc.close()


@pytest.mark.asyncio
async def test_nats_server_fixture_can_restart(nats_server, nats_url):
    assert nats_url == nats_server.url
    nats_server.restart()
    nc = await nats.connect(nats_url)
    try:
        await nc.jetstream().account_info()
    finally:
        await nc.close()
