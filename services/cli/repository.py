"""What `kernelbot up` reads of the read model to decide what to seed."""

from __future__ import annotations

import asyncpg

from schemas.credentials import cli_id_hash

BOARD_NAMES = "SELECT lower(name) AS name FROM leaderboards"
USER_BY_CLI = "SELECT 1 FROM users WHERE cli_id_sha256 = $1"


async def seeded(database_url: str, cli_id: str) -> tuple[set[str], bool]:
    """The leaderboards that exist, and whether the local user does."""
    conn = await asyncpg.connect(database_url)
    try:
        names = {row["name"] for row in await conn.fetch(BOARD_NAMES)}
        return names, await conn.fetchval(USER_BY_CLI, cli_id_hash(cli_id)) is not None
    finally:
        await conn.close()
