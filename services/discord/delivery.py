"""Delivers the bot's outbox to Discord over REST, in order, after the transactions that decided each call commit.

Edits are idempotent and render the submission's state at delivery time; posts carry a nonce Discord enforces, so a
call retried after a crash lands once. A call that fails for a passing reason (Discord down, rate limited, the read
model not there yet) waits and is tried again while the calls after it go on: one slow call never holds back
other submissions, and each call carries everything it shows, so order between calls never matters.
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import discord

from services.core.readmodel import board_reads, standing_reads
from services.discord import forum, podium, projection, reporting, repository, texts

log = logging.getLogger("kernelbot.discord")

# Interaction tokens live 15 minutes; past this age the ephemeral reply is left as it is.
TOKEN_LIFETIME = timedelta(minutes=14, seconds=30)
MAX_ATTEMPTS = 10  # about four minutes of retries
VERDICT_WAITS = 120  # tries (x 0.25 s) for the ledger to show a new score before the verdict goes out without a rank
# Tries (x 0.5 s) for the ends of a finished submission's runs: past a restart, what the old process held comes
# back after the consumer's ack wait (services.discord.bot), possibly after the submission's end.
RUN_END_WAITS = 60


class Retry(Exception):
    def __init__(self, delay_s: float, why: str) -> None:
        super().__init__(why)
        self.delay_s = delay_s


@dataclass
class Layout:
    """Where the bot writes: found or created at start-up (services.discord.layout)."""

    guild_id: int
    submissions_channel: int = 0
    general_channel: int = 0
    forum_channel: int = 0
    category: int = 0
    roles: dict[str, int] | None = None


def _nonce(outbox_id: int, part: int = 0) -> str:
    return f"kb{outbox_id}p{part}"


class Delivery:
    def __init__(self, client: discord.Client, pool: asyncpg.Pool, layout: Layout,
                 profile_link: Callable[[int, str, str], str] | None = None) -> None:
        self.client = client
        self.pool = pool
        self.layout = layout
        self.profile_link = profile_link  # (submission id, gpu, stage) -> a profile artifact's link
        self.wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="discord-delivery")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Finish the call in progress (a call cut in half is the one case a retry cannot tell), then stop."""
        if self._task is None:
            return
        self._stopping = True
        self.wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), grace_s)
        except TimeoutError:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        while not self._stopping:
            try:
                busy = await self.deliver_pending()
            except Exception:
                log.exception("delivering Discord messages failed; retrying")
                busy = False
            if not busy:
                try:
                    await asyncio.wait_for(self.wake.wait(), 0.5)
                except TimeoutError:
                    pass
                self.wake.clear()

    async def deliver_pending(self) -> bool:
        """Deliver what is due, in order; True when something was delivered."""
        rows = await repository.pending(self.pool)
        for row in rows:
            if self._stopping:
                return False
            try:
                await self.deliver(row)
            except Retry as retry:
                await repository.postpone(self.pool, row["id"], retry.delay_s, str(retry))
                return False
            except discord.HTTPException as exc:
                if exc.status >= 500 or exc.status == 429:
                    return await self._later(row, exc)
                log.warning("Discord refused %s %s: %s", row["kind"], row["id"], exc)
                await repository.delivered(self.pool, row["id"], str(exc)[:500])
                continue
            except Exception as exc:  # noqa: BLE001 - Discord unreachable, or a bug: retried, then set aside
                return await self._later(row, exc)
            await repository.delivered(self.pool, row["id"])
        return bool(rows)

    async def _later(self, row, exc: Exception) -> bool:
        """Try again with a growing delay; after MAX_ATTEMPTS the call is set aside (its row keeps the error), so
        one bad call never blocks the messages after it."""
        if row["attempts"] + 1 >= MAX_ATTEMPTS:
            log.error("giving up on Discord call %s %s: %r", row["kind"], row["id"], exc)
            await repository.delivered(self.pool, row["id"], f"gave up: {exc!r}"[:500])
            return True
        log.warning("Discord call %s %s failed (%r); retrying", row["kind"], row["id"], exc)
        await repository.postpone(self.pool, row["id"], min(30.0, 2.0 ** row["attempts"]), repr(exc))
        return False

    async def deliver(self, row) -> None:
        forum_call = {"forum_post": forum.post, "forum_update": forum.update, "forum_archive": forum.archive}.get(
            row["kind"])
        if forum_call is not None:
            await forum_call(self.client, self.pool, self.layout, row["body"])
            return
        handler = {"status": self._status, "thread_report": self._thread_report, "verdict": self._verdict,
                   "podium": self._podium}.get(row["kind"])
        if handler is None:
            raise ValueError(f"unknown kind of Discord call {row['kind']!r}")
        await handler(row)

    # --- per kind ------------------------------------------------------------------------------------------------

    async def _status(self, row) -> None:
        submission_id = row["submission_id"]
        if await repository.later_status_pending(self.pool, submission_id, row["id"]):
            return  # a later edit shows everything this one would
        sub = await repository.tracked(self.pool, submission_id)
        lines = [sub["run_lines"][run] for run in sub["run_order"]]
        if sub["finished"] and any(map(texts.is_pending, lines)) and row["attempts"] < RUN_END_WAITS:
            # the outcome never shows without the lines of the runs it sums up
            raise Retry(0.5, "the submission ended before its runs' ends were applied")
        text = texts.status_message(texts.header(submission_id, sub["leaderboard"], sub["mode"], sub["gpus"]),
                                    lines, sub["final_line"])
        fresh = datetime.now(UTC) - sub["token_issued_at"] < TOKEN_LIFETIME
        if fresh and sub["original_message_id"]:
            webhook = discord.Webhook.partial(sub["application_id"], sub["interaction_token"], client=self.client)
            try:
                await webhook.edit_message(sub["original_message_id"], content=text)
                return
            except (discord.NotFound, discord.Forbidden) as exc:
                log.info("reply of submission %s is gone (%s); posting instead", submission_id, exc)
            except discord.HTTPException as exc:
                if exc.status != 401:
                    raise
        if sub["finished"]:  # the reply can no longer be edited: the outcome goes to the channel instead
            channel = self.client.get_partial_messageable(sub["channel_id"])
            await channel.send(f"<@{sub['user_id']}> {text}"[: texts.MESSAGE_LIMIT], nonce=_nonce(row["id"]),
                               allowed_mentions=discord.AllowedMentions(users=True))

    async def _thread_report(self, row) -> None:
        body, submission_id = row["body"], row["submission_id"]
        sub = await repository.tracked(self.pool, submission_id)
        run = await repository.run(self.pool, body["run_id"])
        thread_id = run["thread_id"] if run else None
        if thread_id is None:
            name = reporting.thread_name(submission_id, texts.MODE_NAMES.get(sub["mode"], sub["mode"]), body["gpu"])
            thread = await self._find_thread(sub["channel_id"], name) if run and run["thread_requested"] else None
            if thread is None:
                await repository.request_thread(self.pool, body["run_id"], submission_id, body["gpu"])
                channel = await self.client.fetch_channel(sub["channel_id"])
                thread = await channel.create_thread(name=name, type=discord.ChannelType.private_thread,
                                                     invitable=False)
            await repository.store_thread(self.pool, body["run_id"], thread.id)
            await thread.add_user(discord.Object(int(sub["user_id"])))
            thread_id = thread.id
        link = self.profile_link
        messages, files = reporting.thread_messages(
            body["gpu"], body["backend"], body["mode"], body["result"],
            (lambda gpu, stage: link(submission_id, gpu, stage)) if link else None)
        target = self.client.get_partial_messageable(thread_id)
        for index, content in enumerate(messages):
            await target.send(content, nonce=_nonce(row["id"], index))
        if files:
            await target.send(files=[discord.File(io.BytesIO(f.content), filename=f.name) for f in files[:10]],
                              nonce=_nonce(row["id"], len(messages)))

    async def _find_thread(self, channel_id: int, name: str) -> discord.Thread | None:
        """The thread an earlier attempt created before it could store the id (the bot stopped in between)."""
        guild = await self.client.fetch_guild(self.layout.guild_id)
        return next((t for t in await guild.active_threads() if t.parent_id == channel_id and t.name == name), None)

    async def _verdict(self, row) -> None:
        body, submission_id = row["body"], row["submission_id"]
        sub = await repository.tracked(self.pool, submission_id)
        board = await board_reads.leaderboard(self.pool, body["leaderboard"])
        standing = None
        if board is not None:
            waiting = await repository.score_of(self.pool, submission_id, body["gpu"]) is None
            if waiting and row["attempts"] < VERDICT_WAITS:
                raise Retry(0.25, "score not in the read model yet")
            standing = await self._standing(board["id"], body["gpu"], body["user_id"], submission_id)
        standing = standing or texts.Standing(rank=None, is_best=False, earlier_scores=0)
        text = texts.verdict(f"<@{body['user_id']}>", body["leaderboard"], body["gpu"], body["score"], standing)
        channel = self.client.get_partial_messageable(sub["channel_id"])
        await channel.send(text, nonce=_nonce(row["id"]), allowed_mentions=discord.AllowedMentions(users=True))

    async def _standing(self, board_id: int, gpu: str, user_id: str, submission_id: int) -> texts.Standing:
        mine = await standing_reads.user_standing(self.pool, board_id, gpu, user_id)  # one row, not the whole board
        is_best = mine is not None and mine["submission_id"] == submission_id
        earlier = await repository.earlier_scores(self.pool, board_id, gpu, user_id, submission_id)
        return texts.Standing(rank=mine["rank"] if is_best else None, is_best=is_best, earlier_scores=earlier)

    async def _podium(self, row) -> None:
        body = row["body"]
        board = await board_reads.leaderboard(self.pool, body["leaderboard"])
        if board is None or board["visibility"] != "public" or board["deadline"] < datetime.now(UTC) \
                or board["forum_id"] == projection.SCRATCH_FORUM_ID:
            return  # closed, finished and scratch leaderboards are not announced
        if not self.layout.submissions_channel:
            return
        moved = podium.change(body["top"], body.get("previous", []))  # rows queued before `previous`: a new #1
        if moved is None:
            return
        channel = self.client.get_partial_messageable(self.layout.submissions_channel)
        await channel.send(texts.podium_news(body["leaderboard"], body["gpu"], moved), nonce=_nonce(row["id"]),
                           allowed_mentions=discord.AllowedMentions.none())
