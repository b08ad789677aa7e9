"""`kernelbot import-upstream`: an upstream KernelBot deployment's history, published as this platform's events.

The upstream database is only read. What it holds becomes events on the events stream, in an order the projections
can follow (boards, users, policy, then each submission with its runs, scores and outcome); the services project them
as they do their own. Upstream's ids of users, submissions and boards are kept. Each event's id is fixed by what it
says (upstream_catalogue.imported), so a second run, or one resumed after an interruption, publishes only what the
stream lacks.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nats.aio.client import Client

from schemas.envelope import Event
from schemas.events import FIRST_PRACTICE_BOARD_ID
from schemas.streams import EVENTS
from services.kit.bus import MSG_ID_HEADER, PUBLISH_ACK_TIMEOUT_S, encode
from services.operate import stream as log
from services.operate import upstream_catalogue as catalogue_map
from services.operate import upstream_repository as platform_db
from services.operate.db import connection
from services.operate.upstream_catalogue import PREFIX, Report
from services.operate.upstream_source import opened
from services.operate.upstream_submissions import submission_events

# How long the import waits for the ledger to apply the boards this platform made itself before it compares ids.
LEDGER_WAIT_S = 10.0


class ImportRefused(Exception):
    pass


@dataclass
class StreamState:
    """What the events stream holds already: the ids of imported events, and what the platform made itself that an
    upstream row would collide with (its practice boards' ids cannot: they come from a range of their own)."""

    ids: set[str] = field(default_factory=set)
    native_boards: set[str] = field(default_factory=set)
    native_board_events: list[str] = field(default_factory=list)  # creations of boards that are not practice
    native_submissions: set[int] = field(default_factory=set)


async def stream_state(client: Client) -> StreamState:
    state = StreamState()
    async for message in log.read_stream(client):
        state.ids.add(message.message_id)
        if message.message_id.startswith(PREFIX):
            continue
        if message.subject == "evt.leaderboard.created":
            created = json.loads(message.data)
            state.native_boards.add(str(created.get("name", "")).lower())
            if not created.get("practice"):
                state.native_board_events.append(message.message_id)
        elif message.subject == "evt.submission.received":
            state.native_submissions.add(int(json.loads(message.data)["submission_id"]))
    return state


@dataclass
class Publisher:
    client: Client
    state: StreamState
    published: int = 0
    skipped: int = 0

    async def __call__(self, events: list[Event]) -> None:
        js = self.client.jetstream()
        for event in events:
            if event.message_id in self.state.ids:
                self.skipped += 1
                continue
            await js.publish(event.subject, encode(event), headers={MSG_ID_HEADER: event.message_id},
                             stream=EVENTS.name, timeout=PUBLISH_ACK_TIMEOUT_S)
            self.state.ids.add(event.message_id)
            self.published += 1


async def platform_boards(database_url: str, state: StreamState) -> dict[int, str]:
    """This platform's boards' names by id, read once the ledger has applied every board the platform made itself
    (one it has not applied has no id yet to compare)."""
    async with connection(database_url) as conn:
        deadline = time.monotonic() + LEDGER_WAIT_S
        while waiting := set(state.native_board_events) - await platform_db.archived(conn, state.native_board_events):
            if time.monotonic() > deadline:
                raise ImportRefused(f"the ledger has not applied {len(waiting)} of this platform's leaderboards yet, "
                                    "so their ids are not known; run the import again once the ledger is running")
            await asyncio.sleep(0.2)
        return await platform_db.board_names_by_id(conn)


def refuse_collisions(state: StreamState, boards: list[dict], submission_ids: list[int],
                      platform: dict[int, str]) -> None:
    """Refuse, before anything is published, upstream boards whose name or id this platform has given a board of
    its own, and submissions whose ids it has used. A board of upstream's name and id is the same board, imported by
    an earlier run of the import: resuming is no collision."""
    names = sorted(row["name"] for row in boards if row["name"].lower() in state.native_boards)
    ids = sorted((row["id"], platform[row["id"]], row["name"]) for row in boards
                 if row["id"] in platform and platform[row["id"]].lower() != row["name"].lower())
    too_high = sorted(row["id"] for row in boards if row["id"] >= FIRST_PRACTICE_BOARD_ID)
    submissions = sorted(set(submission_ids) & state.native_submissions)
    parts = [
        f"leaderboards named {', '.join(names)}" if names else "",
        "leaderboards with upstream's ids: " + ", ".join(
            f"{board_id} is {here!r} here, {there!r} upstream" for board_id, here, there in ids) if ids else "",
        f"{len(submissions)} submissions with upstream's ids (first {submissions[0]})" if submissions else "",
    ]
    if any(parts):
        raise ImportRefused("this platform already has " + "; ".join(part for part in parts if part)
                            + "; import into a platform that has not made these yet")
    if too_high:
        raise ImportRefused(f"upstream's leaderboard ids {too_high} lie in this platform's range of practice board "
                            f"ids (from {FIRST_PRACTICE_BOARD_ID}); they cannot be kept")


def note_renumbered(platform: dict[int, str], boards: list[dict], report: Report) -> None:
    """Boards an earlier version of the import numbered itself keep those ids: the stream has their events."""
    here = {name.lower(): board_id for board_id, name in platform.items()}
    for row in boards:
        board_id = here.get(row["name"].lower())
        if board_id is not None and board_id != row["id"]:
            report.note(f"board {row['name']!r}: id {board_id} here, {row['id']} upstream (imported by a version "
                        "that renumbered boards)")


async def import_upstream(source_url: str, nats_url: str, database_url: str,
                          start: Callable[[int], Callable[[int], None]]) -> tuple[Report, Publisher]:
    """Publish the upstream deployment at `source_url`; `start(total)` opens a progress display, and what it
    returns advances it by a number of steps (a step per board, user and submission)."""
    report = Report()
    async with opened(source_url) as upstream, log.connected(nats_url) as client:
        await log.ensure_streams(client)
        catalogue = await upstream.catalogue()
        state = await stream_state(client)
        submission_ids = await upstream.submission_ids()
        platform = await platform_boards(database_url, state)
        refuse_collisions(state, catalogue.boards, submission_ids, platform)
        note_renumbered(platform, catalogue.boards, report)
        publish = Publisher(client, state)
        advance = start(len(catalogue.boards) + len(catalogue.users) + len(submission_ids))

        board_events, boards = catalogue_map.boards(catalogue, await upstream.first_seen(), report)
        await publish(board_events)
        advance(len(catalogue.boards))
        user_events, names, registered = catalogue_map.users(catalogue, report)
        await publish(user_events)
        await publish(catalogue_map.policy(catalogue, boards, names, registered, report))
        advance(len(catalogue.users))

        async for submission in upstream.submissions():
            board = boards.get(submission.row["leaderboard_id"])
            if board is None:
                report.note(f"submission {submission.row['id']}: its board was not imported; skipped")
            else:
                await publish(submission_events(submission, board, names, report))
            advance(1)
        if catalogue.drafts:
            report.note(f"{catalogue.drafts} editor drafts (leaderboard.draft_code) are not carried over")
        if catalogue.orphan_code_files:
            report.note(f"{catalogue.orphan_code_files} stored code files belong to no submission "
                        "(their submissions were deleted upstream); not carried over")
    if submission_ids:
        async with connection(database_url) as conn:
            await platform_db.reserve_submission_ids(conn, max(submission_ids))
    return report, publish
