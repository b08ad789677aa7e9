"""Credentials at rest: whoever reads the database (or a backup of it) and the event stream finds no CLI id (nor web
id) that authenticates.

The attacker here holds a full copy: every row of every table, every message of every stream with its headers. They
search it for the victim's CLI id, and they present every string it holds about the victim as a CLI id. A copy made
before CLI ids were hashed still holds clear ids; `kernelbot users rotate-cli-id --exposed` is what ends those.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from problems import PROBLEMS_ROOT
from tests.operate.conftest import run_cli
from tests.support.events import publish_raw, query
from tests.support.in_process import InProcessPlatform
from tests.support.oauth_platform import hidden_fields
from tests.support.platform import ADMIN_TOKEN, Platform, identity_board

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()


@pytest.fixture
def platform(nats_url, database_url, tmp_path):
    running = InProcessPlatform(nats_url, database_url, tmp_path, null_gpus=("null",))
    running.start()
    try:
        running.add_boards(identity_board("open", ["null"]))
        yield running
    finally:
        running.stop()


def database_copy(database_url: str) -> list[str]:
    """Every value of every column of every table, as text (bytea as its bytes, escaped)."""
    async def dump() -> list[str]:
        import asyncpg

        conn = await asyncpg.connect(database_url)
        try:
            found = []
            tables = await conn.fetch("SELECT table_name FROM information_schema.tables "
                                      "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'")
            for table in (t["table_name"] for t in tables):
                columns = await conn.fetch("SELECT column_name, data_type FROM information_schema.columns "
                                           "WHERE table_schema = 'public' AND table_name = $1", table)
                values = [f"encode(\"{c['column_name']}\", 'escape')" if c["data_type"] == "bytea"
                          else f"\"{c['column_name']}\"::text" for c in columns]
                for row in await conn.fetch(f"SELECT {', '.join(values)} FROM \"{table}\""):
                    found += [f"{table}: {value}" for value in row.values() if value is not None]
            return found
        finally:
            await conn.close()

    return asyncio.run(dump())


def stream_messages(nats_url: str) -> list[tuple[str, str, dict, bytes]]:
    """Every message of every stream: (stream, subject, headers (the message id among them), data)."""
    async def dump() -> list[tuple[str, str, dict, bytes]]:
        import nats

        client = await nats.connect(nats_url)
        try:
            js = client.jetstream()
            found = []
            for info in await js.streams_info():
                state = info.state
                for seq in range(state.first_seq, state.last_seq + 1 if state.messages else state.first_seq):
                    try:
                        msg = await js.get_msg(info.config.name, seq)
                    except nats.js.errors.NotFoundError:
                        continue
                    found.append((info.config.name, msg.subject, dict(msg.headers or {}), msg.data or b""))
            return found
        finally:
            await client.close()

    return asyncio.run(dump())


def stream_copy(nats_url: str) -> list[str]:
    return [f"{stream} {subject} {json.dumps(headers)} {data.decode(errors='replace')}"
            for stream, subject, headers, data in stream_messages(nats_url)]


def strings_in(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return []


def authenticates(platform: Platform, candidate: str, header: str = "X-Popcorn-Cli-Id") -> bool:
    try:
        answer = platform.http.get("/user/submissions", headers={header: candidate})
    except (httpx.LocalProtocolError, UnicodeEncodeError):
        return False  # not sendable as a header at all
    return answer.status_code == 200


def test_a_copy_of_the_database_and_the_stream_holds_no_working_cli_id(platform):
    web_id = "victim-web-id-6f1c2a9e0b7d4c3a"
    registered = platform.http.post("/admin/users", json={"user_id": "5001", "user_name": "victim",
                                                          "web_auth_id": web_id},
                                    headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert registered.status_code == 200, registered.text
    cli_id = registered.json()["cli_id"]
    platform.wait_for(lambda: authenticates(platform, cli_id), "the registration")
    accepted = platform.submit(cli_id, "open", "null", "leaderboard", CODE)
    assert accepted.status_code == 202, accepted.text
    platform.wait_done(cli_id, accepted.json()["details"]["id"], timeout=60)
    form = hidden_fields(platform.http.get("/web/login").text)  # the form token, as a browser would post it
    signed_in = platform.http.post("/web/login", data={**form, "cli_id": cli_id}, follow_redirects=False)
    assert signed_in.status_code == 303
    platform.http.cookies.clear()

    copy = database_copy(platform.database_url) + stream_copy(platform.nats_url)
    assert len(copy) > 20  # the copy is real: boards, the submission, its runs, their events
    assert [line for line in copy if cli_id in line or web_id in line] == []

    # everything stored about the victim, presented as a CLI id (the digest itself among them): none opens the API
    row = query(platform.database_url, "SELECT * FROM users WHERE user_id = '5001'")[0]
    events = [json.loads(data) | headers for _, subject, headers, data in stream_messages(platform.nats_url)
              if subject.startswith("evt.user.")]
    candidates = {s for s in strings_in({k: v for k, v in row.items() if isinstance(v, str)}) + strings_in(events)
                  if s}
    assert len(candidates) >= 4
    assert [c for c in candidates if authenticates(platform, c)] == []
    assert [c for c in candidates if authenticates(platform, c, "X-Web-Auth-Id")] == []
    assert authenticates(platform, cli_id)  # the ids their holders keep still work
    assert authenticates(platform, web_id, "X-Web-Auth-Id")


def test_rotation_ends_the_ids_an_old_copy_of_the_stream_holds(platform):
    # recorded before CLI ids were hashed: the id in clear, in the payload and in the message id
    old_id = "old-gateway-issued-0123456789abcdef"
    payload = {"user_id": "5002", "user_name": "early", "cli_id": old_id, "web_auth_id": "old-web-id-5002",
               "schema_version": 1,
               "event_id": f"CliUserRegistered:5002:{old_id}", "occurred_at": "2026-01-01T00:00:00Z"}
    publish_raw(platform.nats_url, "evt.user.registered", json.dumps(payload).encode(),
                {"Nats-Msg-Id": payload["event_id"]})
    platform.wait_for(lambda: authenticates(platform, old_id), "the old registration")
    other = platform.register("5003", "later")  # issued hashed: never in clear anywhere, so not rotated

    rotated = run_cli(platform, "users", "rotate-cli-id", "--exposed")

    lines = [line.split("\t") for line in rotated.stdout.splitlines() if "\t" in line]
    assert [user for user, _ in lines] == ["5002"]
    assert "web ids of 5002 in clear" in " ".join((rotated.stdout + rotated.stderr).split())
    assert not authenticates(platform, old_id)  # what the old copy holds opens nothing now
    assert authenticates(platform, lines[0][1])
    assert authenticates(platform, other)
    assert query(platform.database_url, "SELECT user_name FROM users WHERE user_id = '5002'") == [
        {"user_name": "early"}]
    # the new id is in no copy either
    assert [line for line in database_copy(platform.database_url) + stream_copy(platform.nats_url)
            if lines[0][1] in line] == []
