"""Dropping a projection and rebuilding it from the log, through the owning service's own projection code.

Each rebuild is one transaction that first locks the projection's tables against its live consumer, so readers see
the old state until the new one is complete, and the live service simply waits and carries on afterwards. Only
events the live consumer has already applied (its tracking rows) are replayed: whatever it has not reached yet stays
its own to apply, with the events it emits.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import asyncpg

from schemas.events import BY_SUBJECT
from services.ledger import repository as ledger_repository
from services.ledger.handlers import PROJECT_ALL
from services.ledger.projections import BOARD_EVENTS, PLANNED_EVENTS, plan_step
from services.operate import stream as log
from services.scorer import handlers as scorer_handlers

BATCH = 5000  # events read at once from the stream (or the archive, for the scorer)
# Events per set-based step of a ledger rebuild from the archive.
STEP = 50_000
PROJECTIONS = ("ledger", "scorer")
NOT_REPLAYABLE = {
    "dispatcher": "the dispatcher's run queue is work in progress, not a projection: rebuilding it would launch "
                  "every run again. Use `kernelbot rejudge --rerun` to run submissions again.",
}
SCORER_TABLES = ("scorer_submissions", "scorer_runs", "scorer_best", "scorer_reruns", "scorer_board_hardware",
                 "scorer_precheck_clears", "scorer_scores", "scorer_deleted", "scorer_board_deletions")
TRACKED = "SELECT stream_seq FROM tracking WHERE consumer = $1"
ARCHIVE_BOUND = "SELECT COALESCE(max(stream_seq), 0) FROM event_archive"
ARCHIVE_PAGE = """
SELECT stream_seq, subject, payload::text AS payload FROM event_archive WHERE stream_seq > $1 AND stream_seq <= $2
  AND ($3::text[] IS NULL OR subject = ANY($3::text[]))
ORDER BY stream_seq LIMIT $4
"""
ARCHIVE_FIRST = "SELECT min(stream_seq) FROM event_archive"
ARCHIVE_RANGE_COUNT = "SELECT count(*) FROM event_archive WHERE stream_seq BETWEEN $1 AND $2"
BOARD_SEQS = "SELECT stream_seq FROM event_archive WHERE stream_seq <= $1 AND event_type = ANY($2) ORDER BY stream_seq"
ARCHIVE_COUNT = """
SELECT count(*) FROM event_archive WHERE stream_seq <= $1 AND ($2::text[] IS NULL OR subject = ANY($2::text[]))
"""

Progress = Callable[[int], None]


async def _events_from_archive(conn: asyncpg.Connection, bound: int, subjects: list[str] | None,
                               ) -> AsyncIterator[list[tuple[int, object]]]:
    after = 0
    while True:
        rows = await conn.fetch(ARCHIVE_PAGE, after, bound, subjects, BATCH)
        if not rows:
            return
        yield [(r["stream_seq"], BY_SUBJECT[r["subject"]].model_validate_json(r["payload"])) for r in rows]
        after = rows[-1]["stream_seq"]


async def _events_from_stream(nats_url: str, bound: int, subjects: list[str] | None,
                              ) -> AsyncIterator[list[tuple[int, object]]]:
    batch: list[tuple[int, object]] = []
    async with log.connected(nats_url) as client:
        async for message in log.read_stream(client, until_seq=bound):
            if subjects is not None and message.subject not in subjects:
                continue
            try:
                event = BY_SUBJECT[message.subject].model_validate_json(message.data)
            except Exception:  # noqa: BLE001 - poison the live consumer dead-lettered; it changed nothing either
                continue
            batch.append((message.seq, event))
            if len(batch) >= BATCH:
                yield batch
                batch = []
    if batch:
        yield batch


def _source(source: str, conn, nats_url: str, bound: int, subjects: list[str] | None):
    if source == "archive":
        return _events_from_archive(conn, bound, subjects)
    if source == "stream":
        return _events_from_stream(nats_url, bound, subjects)
    raise ValueError(f"unknown source {source!r}: archive or stream")


async def rebuild_ledger(conn: asyncpg.Connection, source: str, nats_url: str, progress: Progress) -> int:
    """Truncate the read model and project the archived events again; from the stream, the archive too."""
    async with conn.transaction():
        # The live ledger's next batch waits here (it writes the archive in the same transaction as the model).
        await conn.execute("LOCK TABLE event_archive IN EXCLUSIVE MODE")
        bound = await conn.fetchval(ARCHIVE_BOUND)
        tables = [*ledger_repository.TABLES, *(["event_archive"] if source == "stream" else [])]
        if source == "archive":
            # the archive is written in the transaction that applies its events: all of it was applied
            await conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY")
            return await _reproject_archive(conn, bound, progress)
        applied = {r["stream_seq"] for r in await conn.fetch(TRACKED, PROJECT_ALL)}
        await conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY")
        count = 0
        async for batch in _source(source, conn, nats_url, bound, None):
            batch = [(seq, event) for seq, event in batch if seq in applied]
            if batch:
                # nobody waits on a replayed submission
                await ledger_repository.project_batch(conn, batch, notify=False)
            count += len(batch)
            progress(len(batch))
        return count


async def _reproject_archive(conn: asyncpg.Connection, bound: int, progress: Progress) -> int:
    """The archive in steps of up to STEP events, set-based: only the events planned in Python are read here, the
    others by the ledger's archive statements; a board change is a step alone, as it is live."""
    boards = [r["stream_seq"] for r in await conn.fetch(BOARD_SEQS, bound, [e.__name__ for e in BOARD_EVENTS])]
    planned = [e.subject for e in PLANNED_EVENTS]
    every_type = {e.__name__ for e in BY_SUBJECT.values()}
    # The tables grow from empty inside this transaction, so their statistics say they are tiny: the planner would
    # join a step's thousands of events to them by scanning them whole, once per event. Steps join by hashing.
    await conn.execute("SET LOCAL enable_nestloop = off")
    count, start = 0, await conn.fetchval(ARCHIVE_FIRST) or bound + 1
    while start <= bound:
        if boards and boards[0] == start:
            end = boards.pop(0)
        else:
            end = min(start + STEP - 1, bound, boards[0] - 1 if boards else bound)
        rows = await conn.fetch(ARCHIVE_PAGE, start - 1, end, planned, STEP)
        events = [(r["stream_seq"], BY_SUBJECT[r["subject"]].model_validate_json(r["payload"])) for r in rows]
        await ledger_repository.apply_step(conn, plan_step(events, every_type), start, end, None, notify=False)
        done = await conn.fetchval(ARCHIVE_RANGE_COUNT, start, end)
        count += done
        progress(done)
        start = end + 1
    return count


async def rebuild_scorer(conn: asyncpg.Connection, source: str, nats_url: str, progress: Progress) -> int:
    """Truncate the scorer's state and apply, in stream order, every event its consumers had applied."""
    consumers = scorer_handlers.CONSUMERS
    subjects = [event.subject for event in consumers]
    async with conn.transaction():
        await conn.execute(f"LOCK TABLE {', '.join(SCORER_TABLES)} IN EXCLUSIVE MODE")
        applied = {event: {r["stream_seq"] for r in await conn.fetch(TRACKED, name)}
                   for event, name in consumers.items()}
        bound = max((max(seqs) for seqs in applied.values() if seqs), default=0)
        await conn.execute(f"TRUNCATE {', '.join(SCORER_TABLES)}")
        count = 0
        async for batch in _source(source, conn, nats_url, bound, subjects):
            for seq, event in batch:
                if seq in applied[type(event)]:
                    # what it emits was published when it was first applied; the log already holds it
                    await scorer_handlers.APPLIERS[type(event)](conn, event)
                    count += 1
            progress(len(batch))
        return count


async def planned_work(conn: asyncpg.Connection, projection: str) -> int:
    """How many archived events a rebuild reads (for the progress bar)."""
    bound = await conn.fetchval(ARCHIVE_BOUND)
    subjects = None if projection == "ledger" else [e.subject for e in scorer_handlers.CONSUMERS]
    return await conn.fetchval(ARCHIVE_COUNT, bound, subjects)


REBUILDERS = {"ledger": rebuild_ledger, "scorer": rebuild_scorer}
