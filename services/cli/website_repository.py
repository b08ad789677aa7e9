"""The database role of a website that reads the `leaderboard` schema as upstream's website does (kernelboard):
what it may read and the little it may write (migrations/0105 and 0107; docs/security.md, "The website's role")."""

from __future__ import annotations

import re

import asyncpg

ROLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# The views the website reads; they read the platform's tables as their owner, so the role needs nothing more.
VIEWS = ("leaderboard", "gpu_type", "templates", "submission", "code_files", "runs", "submission_job_status")
# Sign-in writes a web id for a user (a new one with their name) and reads it back; nothing else of the table.
USER_INFO_READ = ("id", "user_name", "created_at", "web_auth_id", "is_banned")


def _grants(role: str) -> list[str]:
    views = ", ".join(f"leaderboard.{view}" for view in VIEWS)
    return [
        # CREATE: kernelboard's ranking worker runs CREATE TABLE IF NOT EXISTS leaderboard.ranking_snapshot at every
        # start, which Postgres checks against the schema even when the table exists.
        f"GRANT USAGE, CREATE ON SCHEMA leaderboard TO {role}",
        f"GRANT SELECT ON {views} TO {role}",
        f"GRANT SELECT ({', '.join(USER_INFO_READ)}) ON leaderboard.user_info TO {role}",
        f"GRANT INSERT (id, user_name, web_auth_id), UPDATE (web_auth_id) ON leaderboard.user_info TO {role}",
    ]


def valid_name(role: str) -> bool:
    return ROLE_NAME.fullmatch(role) is not None


async def grant(conn: asyncpg.Connection, role: str, password: str | None, practice_boards: bool | None) -> bool:
    """Give `role` the website's rights, creating it (LOGIN) when it does not exist; True when it was created."""
    assert valid_name(role), role  # checked by the caller: the name is spliced into the statements
    created = False
    async with conn.transaction():
        if await conn.fetchval("SELECT NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", role):
            await conn.execute(f"CREATE ROLE {role} LOGIN")
            created = True
        if password:
            literal = await conn.fetchval("SELECT quote_literal($1)", password)
            await conn.execute(f"ALTER ROLE {role} PASSWORD {literal}")
        for statement in _grants(role):
            await conn.execute(statement)
        if practice_boards is not None:
            shown = "shown" if practice_boards else "hidden"
            await conn.execute(f"ALTER ROLE {role} SET kernelbot.practice_boards = '{shown}'")
    return created
