"""One Postgres connection for an operator command, with the same JSON codecs the services use."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from services.kit.db import create_pool


@asynccontextmanager
async def connection(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    pool = await create_pool(database_url, 1)
    try:
        async with pool.acquire() as conn:
            yield conn
    finally:
        await pool.close()
