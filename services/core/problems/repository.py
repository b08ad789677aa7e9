"""SQL the admin problem routes read (leaderboards to compare with, submissions of a board being deleted)."""

from __future__ import annotations

import json

import asyncpg

from services.core.problems.sync import Board

BOARDS = "SELECT name, task, description, templates, deadline FROM leaderboards"
BOARD = "SELECT id, name, task_hash FROM leaderboards WHERE lower(name) = lower($1)"
LIVE_SUBMISSIONS = """
SELECT s.id, s.user_id FROM submissions s JOIN leaderboards l ON l.id = s.leaderboard_id
WHERE lower(l.name) = lower($1) AND NOT s.deleted ORDER BY s.id
"""


def _json(value):
    return json.loads(value) if isinstance(value, str) else value


async def boards(pool: asyncpg.Pool) -> dict[str, Board]:
    rows = await pool.fetch(BOARDS)
    return {row["name"].lower(): Board(row["name"], _json(row["task"]), row["description"],
                                       _json(row["templates"]) or {}, row["deadline"]) for row in rows}


async def board(pool: asyncpg.Pool, name: str):
    return await pool.fetchrow(BOARD, name)


async def live_submissions(pool: asyncpg.Pool, name: str) -> list:
    return await pool.fetch(LIVE_SUBMISSIONS, name)
