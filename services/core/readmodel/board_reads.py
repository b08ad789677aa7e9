"""Leaderboards as the read model holds them: by name, all of them, and what a ranking request needs of one."""

from __future__ import annotations

import asyncpg

LEADERBOARD = "SELECT * FROM leaderboards WHERE lower(name) = lower($1)"
LEADERBOARDS = "SELECT * FROM leaderboards ORDER BY id"
# What a ranking request needs of its board, with the version of the (board, GPU) standings its cache keys on.
BOARD_STANDING = """
SELECT l.id, l.name, l.gpus, l.deadline, l.visibility, jsonb_strip_nulls(jsonb_build_object('lang', l.task -> 'lang'))
           AS task, COALESCE(v.version, 0) AS standing_version
FROM leaderboards l LEFT JOIN standing_versions v ON v.leaderboard_id = l.id AND v.gpu = $2
WHERE lower(l.name) = lower($1)
"""
STANDING_VERSION = "SELECT version FROM standing_versions WHERE leaderboard_id = $1 AND gpu = $2"
# What the web page of a board shows of it, with the version of one GPU's standings ($2: a GPU, or NULL for none
# yet), in one round trip: never the task (its files can weigh hundreds of kilobytes, parsed on every read).
BOARD_PAGE = """
SELECT l.id, l.name, l.gpus, l.deadline, l.visibility, l.ranking_by, l.description,
       COALESCE(v.version, 0) AS standing_version
FROM leaderboards l LEFT JOIN standing_versions v ON v.leaderboard_id = l.id AND v.gpu = $2
WHERE lower(l.name) = lower($1)
"""


async def leaderboard(pool: asyncpg.Pool, name: str):
    return await pool.fetchrow(LEADERBOARD, name)


async def board_standing(pool: asyncpg.Pool, name: str, gpu: str):
    return await pool.fetchrow(BOARD_STANDING, name, gpu)


async def board_page(pool: asyncpg.Pool, name: str, gpu: str | None):
    return await pool.fetchrow(BOARD_PAGE, name, gpu)


async def standing_version(pool: asyncpg.Pool, leaderboard_id: int, gpu: str) -> int:
    return await pool.fetchval(STANDING_VERSION, leaderboard_id, gpu) or 0


async def leaderboards(pool: asyncpg.Pool):
    return await pool.fetch(LEADERBOARDS)
