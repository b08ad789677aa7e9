"""CLI ids recorded in clear before they were hashed: migration 0090 hashes them in a database that holds them, and
old-format events, projected live or replayed from the stream or the archive, leave only digests behind."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import pytest
from yoyo import get_backend, read_migrations

from schemas.credentials import cli_id_hash
from services.kit.db import MIGRATIONS_DIR, _yoyo_url, apply_migrations
from services.operate import stream as log
from tests.operate.conftest import run_cli
from tests.support.events import delete_all_streams, publish_raw, query
from tests.support.in_process import InProcessPlatform

ADA, BOB = "ada-clear-id-0123456789", "bob-clear-id-9876543210"
WEB = "ada-web-id-5555555555"
OLD_EVENTS = [
    ("CliUserRegistered", "evt.user.registered",
     {"user_id": "u1", "user_name": "ada", "cli_id": ADA, "web_auth_id": WEB}, f"CliUserRegistered:u1:{ADA}"),
    ("OAuthUserRegistered", "evt.user.oauth_registered",
     {"user_id": "42", "user_name": "bob", "cli_id": BOB, "provider": "github", "is_reset": False},
     f"OAuthUserRegistered:github:42:{BOB}"),
]


def old_payload(fields: dict, event_id: str) -> dict:
    return {"schema_version": 1, "event_id": event_id, "occurred_at": "2026-01-01T00:00:00Z", "correlation_id": "",
            "causation_id": "", **fields}


def migrate_until(database_url: str, last: str) -> None:
    backend = get_backend(_yoyo_url(database_url))
    wanted = read_migrations(str(MIGRATIONS_DIR)).filter(lambda m: m.id <= last)
    with backend.lock():
        backend.apply_migrations(backend.to_apply(wanted))


def everything(database_url: str) -> str:
    """The users and the archive, as one text to search."""
    rows = query(database_url, "SELECT to_jsonb(u)::text AS t FROM users u UNION ALL "
                               "SELECT to_jsonb(e)::text FROM event_archive e")
    return "\n".join(r["t"] for r in rows)


def users(database_url: str) -> list[tuple]:
    return [tuple(r.values()) for r in query(database_url, "SELECT user_id, user_name, cli_id_sha256, "
                                                           "web_auth_id_sha256, provider FROM users ORDER BY user_id")]


EXPECTED = [("42", "bob", cli_id_hash(BOB), None, "github"), ("u1", "ada", cli_id_hash(ADA), cli_id_hash(WEB), None)]


def test_the_migration_hashes_the_ids_a_database_holds_in_clear(database_url):
    migrate_until(database_url, "0074_drop_unread_run_indexes")

    async def fill() -> None:
        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute("INSERT INTO users (user_id, user_name, cli_id, web_auth_id, provider) VALUES "
                               "('u1', 'ada', $1, $3, NULL), ('42', 'bob', $2, NULL, 'github'), "
                               "('u3', 'web only', NULL, 'w3', NULL)",
                               ADA, BOB, WEB)
            for seq, (event_type, subject, fields, event_id) in enumerate(OLD_EVENTS, start=1):
                await conn.execute(
                    "INSERT INTO event_archive (stream_seq, event_id, event_type, subject, occurred_at, payload) "
                    "VALUES ($1, $2, $3, $4, now(), $5::jsonb)",
                    seq, event_id, event_type, subject, json.dumps(old_payload(fields, event_id)))
            await conn.execute(
                "INSERT INTO event_archive (stream_seq, event_id, event_type, subject, occurred_at, payload) "
                "VALUES (3, 'UserRenamed:u1:c1', 'UserRenamed', 'evt.user.renamed', now(), $1::jsonb)",
                json.dumps({"user_id": "u1", "user_name": "Ada", "change_id": "c1"}))
        finally:
            await conn.close()

    asyncio.run(fill())
    assert ADA in everything(database_url)

    assert apply_migrations(database_url) >= 1

    assert users(database_url) == [*EXPECTED, ("u3", "web only", None, cli_id_hash("w3"), None)]
    text = everything(database_url)
    assert ADA not in text and BOB not in text and WEB not in text
    archive = {r["stream_seq"]: r for r in query(
        database_url, "SELECT stream_seq, event_id, payload::text AS payload FROM event_archive")}
    assert archive[1]["event_id"] == f"CliUserRegistered:u1:{cli_id_hash(ADA)}"
    assert json.loads(archive[2]["payload"])["cli_id_sha256"] == cli_id_hash(BOB)
    assert json.loads(archive[1]["payload"])["web_auth_id_sha256"] == cli_id_hash(WEB)
    assert json.loads(archive[3]["payload"]) == {"user_id": "u1", "user_name": "Ada", "change_id": "c1"}
    # an id is still unique, as its digest
    with pytest.raises(asyncpg.UniqueViolationError):
        asyncio.run(_insert_user(database_url, "u4", cli_id_hash(ADA)))
    # the archive replays into the same users
    run_cli(_Urls(database_url), "events", "replay", "ledger", "--source", "archive")
    assert [(u[0], u[2]) for u in users(database_url)] == [
        ("42", cli_id_hash(BOB)), ("u1", cli_id_hash(ADA))]  # u3 never had an event: the archive is the truth


async def _insert_user(database_url: str, user_id: str, digest: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("INSERT INTO users (user_id, user_name, cli_id_sha256) VALUES ($1, 'x', $2)",
                           user_id, digest)
    finally:
        await conn.close()


class _Urls:
    """What run_cli needs of a platform when no service runs."""

    def __init__(self, database_url: str, nats_url: str = "nats://127.0.0.1:1") -> None:
        self.database_url, self.nats_url = database_url, nats_url

    def env(self) -> dict[str, str]:
        return {"KB_DATABASE_URL": self.database_url, "KB_NATS_URL": self.nats_url}


def test_old_format_events_project_and_replay_into_digests_only(nats_url, database_url, tmp_path):
    apply_migrations(database_url)
    platform = InProcessPlatform(nats_url, database_url, tmp_path)
    platform.start("ledger")
    try:
        async def declare() -> None:
            async with log.connected(nats_url) as client:
                await log.ensure_streams(client)

        asyncio.run(declare())
        # as a gateway of before published them (or `kernelbot events import` of an export of that time)
        for _, subject, fields, event_id in OLD_EVENTS:
            publish_raw(nats_url, subject, json.dumps(old_payload(fields, event_id)).encode(),
                        {"Nats-Msg-Id": event_id})
        platform.wait_for(lambda: len(users(database_url)) == 2, "the old registrations")
        assert users(database_url) == EXPECTED
        assert not any(clear in everything(database_url) for clear in (ADA, BOB, WEB))

        run_cli(platform, "events", "replay", "ledger", "--source", "stream")
        assert users(database_url) == EXPECTED
        assert not any(clear in everything(database_url) for clear in (ADA, BOB, WEB))
        run_cli(platform, "events", "replay", "ledger", "--source", "archive")
        assert users(database_url) == EXPECTED
    finally:
        platform.stop()

    # the stream itself is rewritten by export, empty, import: same sequences, digests only
    exported = tmp_path / "events.jsonl"
    run_cli(platform, "events", "export", "--hash-cli-ids", str(exported))
    assert not any(clear in exported.read_text() for clear in (ADA, BOB, WEB))
    asyncio.run(delete_all_streams(nats_url))
    run_cli(platform, "events", "import", str(exported))
    stored = asyncio.run(stored_messages(nats_url))
    assert [seq for seq, _ in stored] == [1, 2] and not any(c in text for c in (ADA, BOB, WEB) for _, text in stored)
    run_cli(platform, "events", "replay", "ledger", "--source", "stream")
    assert users(database_url) == EXPECTED


async def stored_messages(nats_url: str) -> list[tuple[int, str]]:
    async with log.connected(nats_url) as client:
        return [(m.seq, f"{m.headers} {m.data.decode()}") async for m in log.read_stream(client)]
