"""What `kernelbot import-upstream` reads of this platform's read model, and the one thing it moves there."""

from __future__ import annotations

import asyncpg

BOARDS = "SELECT id, name FROM leaderboards"
ARCHIVED = "SELECT event_id FROM event_archive WHERE event_id = ANY($1::text[])"
# Upstream's submission ids are kept: the platform's own ids continue above the largest one. (Board ids need no such
# step here: the ledger moves its sequence past each id a LeaderboardCreated names, live and in a rebuild alike.)
RESERVE_SUBMISSION_IDS = """
SELECT setval('submission_ids', GREATEST($1::bigint, (SELECT last_value FROM submission_ids)))"""


async def board_names_by_id(conn: asyncpg.Connection) -> dict[int, str]:
    return {row["id"]: row["name"] for row in await conn.fetch(BOARDS)}


async def archived(conn: asyncpg.Connection, event_ids: list[str]) -> set[str]:
    """Those of `event_ids` the ledger has applied (it archives an event in the transaction that applies it)."""
    return {row["event_id"] for row in await conn.fetch(ARCHIVED, event_ids)}


async def reserve_submission_ids(conn: asyncpg.Connection, largest: int) -> None:
    await conn.execute(RESERVE_SUBMISSION_IDS, largest)
