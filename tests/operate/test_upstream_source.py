"""Reading upstream databases of older schema versions, and refusing what is not one (no platform needed)."""

from __future__ import annotations

import asyncio
import json
import uuid

import asyncpg
import pytest

from schemas.events import LeaderboardCreated, ScoreComputed, SubmissionFinished
from services.kit.embedded.databases import create_database, drop_database
from services.operate import upstream_catalogue as catalogue_map
from services.operate.upstream_source import opened
from services.operate.upstream_submissions import MAX_OUTPUT_CHARS, stage, submission_events
from tests.support.upstream_db import PY_TASK, ranked

# As a deployment of spring 2025 had it: no visibility, invites, rate limits, bans, job status or submission status.
OLDER_SCHEMA = """
CREATE SCHEMA leaderboard;
CREATE TABLE leaderboard.leaderboard (id SERIAL PRIMARY KEY, name TEXT UNIQUE NOT NULL, deadline TIMESTAMPTZ NOT NULL,
    task JSONB NOT NULL, creator_id BIGINT NOT NULL DEFAULT -1, forum_id BIGINT NOT NULL, description TEXT NOT NULL,
    secret_seed BIGINT NOT NULL DEFAULT 1);
CREATE TABLE leaderboard.gpu_type (leaderboard_id INTEGER NOT NULL, gpu_type TEXT NOT NULL);
CREATE TABLE leaderboard.user_info (id TEXT PRIMARY KEY, user_name TEXT, cli_id VARCHAR(255));
CREATE TABLE leaderboard.code_files (id SERIAL PRIMARY KEY, code BYTEA NOT NULL);
CREATE TABLE leaderboard.submission (id SERIAL PRIMARY KEY, leaderboard_id INTEGER NOT NULL, file_name TEXT NOT NULL,
    user_id TEXT NOT NULL, code_id INTEGER NOT NULL, submission_time TIMESTAMPTZ NOT NULL, done BOOLEAN DEFAULT false);
CREATE TABLE leaderboard.runs (id SERIAL PRIMARY KEY, submission_id INTEGER NOT NULL, start_time TIMESTAMPTZ NOT NULL,
    end_time TIMESTAMPTZ NOT NULL, mode TEXT NOT NULL, secret BOOLEAN NOT NULL, runner TEXT NOT NULL, score NUMERIC,
    passed BOOLEAN NOT NULL, compilation JSONB, meta JSONB, result JSONB, system_info JSONB NOT NULL);
"""


@pytest.fixture
def database(postgres_server_url):
    name = f"kb_upstream_old_{uuid.uuid4().hex[:12]}"
    url = create_database(postgres_server_url, name)
    yield url
    drop_database(postgres_server_url, name)


async def fill_older(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(OLDER_SCHEMA)
        await conn.execute("INSERT INTO leaderboard.leaderboard (name, deadline, task, forum_id, description) VALUES "
                           "('grayscale', '2025-06-01T00:00:00+00', $1::text::jsonb, 12, 'gray')", json.dumps(PY_TASK))
        await conn.execute("INSERT INTO leaderboard.gpu_type VALUES (1, 'L4')")
        await conn.execute("INSERT INTO leaderboard.user_info VALUES ('77', 'grace', 'old-cli-id-without-validity')")
        await conn.execute("INSERT INTO leaderboard.code_files (code) VALUES ('print(1)')")
        await conn.execute("INSERT INTO leaderboard.submission (leaderboard_id, file_name, user_id, code_id, "
                           "submission_time, done) VALUES (1, 'g.py', '77', 1, '2025-05-01T00:00:00+00', true)")
        for mode, secret, gpu, score, passed, result in ranked("L4", 0.25):
            await conn.execute(
                "INSERT INTO leaderboard.runs (submission_id, start_time, end_time, mode, secret, runner, score, "
                "passed, result, system_info) VALUES (1, now(), now(), $1, $2, $3, $4, $5, $6::text::jsonb, '{}')",
                mode, secret, gpu, score, passed, json.dumps(result))
    finally:
        await conn.close()


async def mapped(url: str) -> tuple[list, catalogue_map.Report]:
    report = catalogue_map.Report()
    async with opened(url) as upstream:
        catalogue = await upstream.catalogue()
        events, boards = catalogue_map.boards(catalogue, await upstream.first_seen(), report)
        users, names, registered = catalogue_map.users(catalogue, report)
        events += users + catalogue_map.policy(catalogue, boards, names, registered, report)
        async for submission in upstream.submissions():
            events += submission_events(submission, boards[submission.row["leaderboard_id"]], names, report)
    return events, report


def test_an_older_upstream_schema_is_read_with_upstream_defaults(database):
    asyncio.run(fill_older(database))
    events, report = asyncio.run(mapped(database))
    [board] = [e for e in events if isinstance(e, LeaderboardCreated)]
    assert (board.visibility, board.forum_id, board.gpus) == ("public", 12, ["L4"])
    assert board.occurred_at.isoformat() == "2025-05-01T00:00:00+00:00"  # its first submission
    assert [e.score for e in events if isinstance(e, ScoreComputed)] == [0.25]
    assert [e.status for e in events if isinstance(e, SubmissionFinished)] == ["succeeded"]
    assert report.counts["users with a CLI id"] == 1 and report.problems == []  # before cli_valid, ids were valid
    assert all(e.event_id.startswith("upstream:") for e in events)


def test_a_database_without_upstreams_schema_is_refused(database):
    async def read() -> None:
        async with opened(database):
            pass

    with pytest.raises(LookupError, match="not an upstream KernelBot database"):
        asyncio.run(read())


def test_the_upstream_database_is_only_read(database):
    asyncio.run(fill_older(database))

    async def write() -> None:
        async with opened(database) as upstream:
            await upstream.conn.execute("DELETE FROM leaderboard.runs")

    with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
        asyncio.run(write())


def test_a_runs_long_output_is_cut_to_fit_one_event_and_reported():
    report = catalogue_map.Report()
    row = {"id": 9, "mode": "test", "passed": True, "start_time": None, "end_time": None, "result": {"n": 1},
           "meta": {"stdout": "x" * (MAX_OUTPUT_CHARS + 5), "stderr": "warn", "success": True, "exit_code": 0}}
    evaluation = stage(row, report, 42)
    assert evaluation.run is not None and len(evaluation.run.stdout) == MAX_OUTPUT_CHARS
    assert evaluation.run.stderr == "warn" and evaluation.run.result == {"n": "1"}
    assert report.problems == [f"submission 42: test stdout cut from {MAX_OUTPUT_CHARS + 5} to {MAX_OUTPUT_CHARS} "
                               "characters"]
