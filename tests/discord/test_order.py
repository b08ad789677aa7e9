"""A submission's reply comes out right whatever order its end, its runs' ends and a bot restart come in.

Each test has its own NATS and Postgres, and nothing but the bot consumes them: the events are published by the
test in the order it forces, where the platform would publish them in its own.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import asyncpg
import nats
import pytest

from schemas.contracts import EvalResult, FullResult, RunResult
from schemas.events import PlannedRun, RunCompleted, RunStarted, SubmissionAccepted, SubmissionFinished
from schemas.streams import EVENTS
from services.discord import repository
from services.discord.bot import CONSUMER
from services.discord.reporting import run_result, status_report
from services.kit.bus import publish_all
from tests.discord.wire import eventually, start_bot
from tests.support.fake_discord import APP_ID

SUBMISSION = 41
PUBLIC, SECRET = "run-41-public", "run-41-secret"


def accepted() -> SubmissionAccepted:
    return SubmissionAccepted(
        submission_id=SUBMISSION, leaderboard="fast_board", user_id="9001", user_name="dora", mode="leaderboard",
        ranking_by="last", submitted_at=datetime.now(UTC),
        runs=[PlannedRun(run_id=PUBLIC, gpu="null", mode="leaderboard"),
              PlannedRun(run_id=SECRET, gpu="null", mode="leaderboard", secret=True)])


def completed(run_id: str, secret: bool) -> RunCompleted:
    passed = EvalResult(run=RunResult(success=True, passed=True, result={"check": "pass"}))
    return RunCompleted(run_id=run_id, submission_id=SUBMISSION, leaderboard="fast_board", gpu="null",
                        mode="leaderboard", secret=secret, backend="null",
                        result=FullResult(success=True, runs={"test": passed, "leaderboard": passed}))


def expected_lines() -> list[str]:
    return [status_report("null", "null", "leaderboard", e.secret, run_result(e))
            for e in (completed(PUBLIC, False), completed(SECRET, True))]


async def track(database_url: str, fake, channel_id: int) -> str:
    """A ranked submission made from Discord, as the submit command leaves it before its events exist."""
    token = f"token-{uuid.uuid4().hex}"
    message = fake.answered(token, "**Submission 41**: ranked run of `fast_board` on null\n⏳ queued")
    conn = await asyncpg.connect(database_url)
    try:
        await repository.track_submission(
            conn, submission_id=SUBMISSION, user_id="9001", user_name="dora", leaderboard="fast_board",
            mode="leaderboard", gpus=["null"], channel_id=channel_id, application_id=APP_ID, token=token,
            issued_at=datetime.now(UTC), message_id=int(message["id"]))
    finally:
        await conn.close()
    return token


def finished_without_runs(fake, token: str) -> list[str]:
    """Every text the reply showed that announced the outcome without the lines of the runs it sums up."""
    lines = expected_lines()
    return [text for text in fake.original(token).get("history", [])
            if "Submission 41 finished" in text and not all(line in text for line in lines)]


async def waits(database_url: str) -> int:
    """Status edits the delivery held back because the submission had ended before its runs' ends were in."""
    conn = await asyncpg.connect(database_url)
    try:
        return await conn.fetchval("SELECT count(*) FROM discord_outbox WHERE error LIKE '%runs'' ends%'")
    finally:
        await conn.close()


async def held_back(database_url: str) -> None:
    for _ in range(200):
        if await waits(database_url):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the delivery never held back the outcome")


async def final_reply(fake, token: str) -> str:
    await eventually(lambda: "Submission 41 finished" in fake.original(token)["content"], 40,
                     lambda: f"the outcome; last: {fake.original(token)['content']!r}")
    return fake.original(token)["content"]


async def test_an_end_applied_before_the_runs_ends_waits_for_them(fake_discord, nats_url, database_url):
    """The stream itself holds the submission's end before its runs' ends: the outcome waits for their lines."""
    bot = await start_bot(fake_discord, nats_url, database_url)
    try:
        token = await track(database_url, fake_discord, bot.layout.submissions_channel)
        await publish_all(nats_url, [accepted(), SubmissionFinished(submission_id=SUBMISSION, status="succeeded")])
        await held_back(database_url)
        assert "finished" not in fake_discord.original(token)["content"]
        await publish_all(nats_url, [RunStarted(run_id=PUBLIC, submission_id=SUBMISSION, gpu="null"),
                                     completed(PUBLIC, False), completed(SECRET, True)])
        final = await final_reply(fake_discord, token)
    finally:
        await bot.client.close()
    for line in expected_lines():
        assert line in final, final
    assert "⏳" not in final and "(secret) ✅ success" in final
    assert finished_without_runs(fake_discord, token) == []


@pytest.mark.slow
async def test_a_restart_with_run_ends_held_by_the_stopped_bot(fake_discord, nats_url, database_url):
    """The bot stopped holding the runs' ends it had fetched and not acknowledged; the submission's end comes after
    them in the stream. The restarted bot applies them first, in stream order, and the reply shows them all."""
    first = await start_bot(fake_discord, nats_url, database_url)
    token = await track(database_url, fake_discord, first.layout.submissions_channel)
    await first.client.close()

    await publish_all(nats_url, [accepted(), RunStarted(run_id=PUBLIC, submission_id=SUBMISSION, gpu="null"),
                                 completed(PUBLIC, False), completed(SECRET, True)])
    client = await nats.connect(nats_url)
    try:  # the stopped bot's fetch: delivered to it, never acknowledged
        held = await client.jetstream().pull_subscribe_bind(durable=CONSUMER, stream=EVENTS.name)
        fetched = await held.fetch(4, timeout=5)
        assert [m.subject for m in fetched][-1] == RunCompleted.subject
        await publish_all(nats_url, [SubmissionFinished(submission_id=SUBMISSION, status="succeeded")])
    finally:
        await client.close()

    again = await start_bot(fake_discord, nats_url, database_url)
    try:
        final = await final_reply(fake_discord, token)
    finally:
        await again.client.close()
    for line in expected_lines():
        assert line in final, final
    assert finished_without_runs(fake_discord, token) == []
    assert await waits(database_url) == 0  # stream order survived the restart: the outcome never waited

