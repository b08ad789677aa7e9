"""Users as the read model holds them: who a presented CLI or web id is, and which closed boards they are invited to."""

from __future__ import annotations

import asyncpg

from schemas.credentials import cli_id_hash

USER_BY_CLI = "SELECT user_id, user_name, banned FROM users WHERE cli_id_sha256 = $1"
USER_BY_WEB = "SELECT user_id, user_name, banned FROM users WHERE web_auth_id_sha256 = $1"
# A web id a website wrote itself at sign-in (migrations/0107): the website's user, with the name and ban the platform
# keeps when it knows them.
USER_BY_WEBSITE = """
SELECT w.id AS user_id, COALESCE(u.user_name, w.user_name, w.id) AS user_name, COALESCE(u.banned, w.is_banned) AS banned,
       u.user_id IS NOT NULL AS known
FROM leaderboard.user_info w LEFT JOIN users u ON u.user_id = w.id
WHERE w.web_auth_id_sha256 = $1"""
CLI_OWNER = "SELECT user_id FROM users WHERE cli_id_sha256 = $1"
HAS_INVITE = "SELECT EXISTS (SELECT 1 FROM invites WHERE user_id = $1 AND $2::integer = ANY(leaderboard_ids))"
INVITED_BOARDS = "SELECT DISTINCT unnest(leaderboard_ids) AS id FROM invites WHERE user_id = $1"


async def user_by_cli(pool: asyncpg.Pool, cli_id: str):
    """The user a presented (clear) CLI id authenticates; only its digest is stored and sent to the database."""
    return await pool.fetchrow(USER_BY_CLI, cli_id_hash(cli_id))


async def user_by_web(pool: asyncpg.Pool, web_id: str):
    return await pool.fetchrow(USER_BY_WEB, cli_id_hash(web_id))  # web ids are stored hashed like CLI ids


async def user_by_website(pool: asyncpg.Pool, web_id: str):
    return await pool.fetchrow(USER_BY_WEBSITE, cli_id_hash(web_id))


async def cli_owner(pool: asyncpg.Pool, cli_id: str) -> str | None:
    return await pool.fetchval(CLI_OWNER, cli_id_hash(cli_id))


async def has_invite(pool: asyncpg.Pool, user_id: str, leaderboard_id: int) -> bool:
    """Whether a claimed invite opens a closed leaderboard to this user."""
    return await pool.fetchval(HAS_INVITE, user_id, leaderboard_id)


async def invited_boards(pool: asyncpg.Pool, user_id: str) -> set[int]:
    return {row["id"] for row in await pool.fetch(INVITED_BOARDS, user_id)}
