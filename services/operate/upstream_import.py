"""`kernelbot import-upstream`: an upstream KernelBot deployment's history, published as this platform's events.

The upstream database is only read. What it holds becomes events on the events stream, in an order the projections
can follow (boards, users, policy, then each submission with its runs, scores and outcome); the services project them
as they do their own. Each event's id is fixed by what it says (upstream_catalogue.imported), so a second run, or one
resumed after an interruption, publishes only what the stream lacks.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from nats.aio.client import Client

from schemas.envelope import Event
from schemas.streams import EVENTS
from services.kit.bus import MSG_ID_HEADER, PUBLISH_ACK_TIMEOUT_S, encode
from services.operate import stream as log
from services.operate import upstream_catalogue as catalogue_map
from services.operate.db import connection
from services.operate.upstream_catalogue import PREFIX, Report
from services.operate.upstream_source import opened
from services.operate.upstream_submissions import submission_events

# Upstream's submission ids are kept: the platform's own ids continue above the largest one.
RESERVE_SUBMISSION_IDS = """
SELECT setval('submission_ids', GREATEST($1::bigint, (SELECT last_value FROM submission_ids)))"""


class ImportRefused(Exception):
    pass


@dataclass
class StreamState:
    """What the events stream holds already: the ids of imported events, and what the platform made itself that an
    upstream row would collide with."""

    ids: set[str] = field(default_factory=set)
    native_boards: set[str] = field(default_factory=set)
    native_submissions: set[int] = field(default_factory=set)


async def stream_state(client: Client) -> StreamState:
    state = StreamState()
    async for message in log.read_stream(client):
        state.ids.add(message.message_id)
        if message.message_id.startswith(PREFIX):
            continue
        if message.subject == "evt.leaderboard.created":
            state.native_boards.add(str(json.loads(message.data).get("name", "")).lower())
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


def refuse_collisions(state: StreamState, board_names: list[str], submission_ids: list[int]) -> None:
    boards = sorted(name for name in board_names if name.lower() in state.native_boards)
    submissions = sorted(set(submission_ids) & state.native_submissions)
    if boards or submissions:
        raise ImportRefused(
            "this platform already has "
            + "; ".join(part for part in (
                f"leaderboards named {', '.join(boards)}" if boards else "",
                f"{len(submissions)} submissions with upstream's ids (first {submissions[0]})" if submissions else "",
            ) if part)
            + "; import into a platform that has not made these yet")


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
        refuse_collisions(state, [row["name"] for row in catalogue.boards], submission_ids)
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
            await conn.execute(RESERVE_SUBMISSION_IDS, max(submission_ids))
    return report, publish
