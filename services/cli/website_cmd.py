"""`kernelbot website-role ROLE`: the database role a website such as kernelboard (gpumode.com) connects with."""

from __future__ import annotations

import asyncio
import os
from typing import Annotated

import typer

from services.cli.options import DatabaseUrl, fail, urls

PASSWORD_VARIABLE = "KB_WEBSITE_DB_PASSWORD"


def website_role(
    role: Annotated[str, typer.Argument(help="The role's name (lowercase letters, digits, _)")],
    practice_boards: Annotated[bool | None, typer.Option(
        "--practice-boards/--no-practice-boards",
        help="Show the platform's practice boards to this role, or hide them (hidden unless told)")] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Create or update the website's role: it reads the `leaderboard` schema, writes only the web ids of sign-in, and
    may create kernelboard's ranking table there. Its password, if any, is read from KB_WEBSITE_DB_PASSWORD."""
    from services.cli import website_repository

    if not website_repository.valid_name(role):
        raise fail(f"{role!r} is not a role name this command makes: lowercase letters, digits and _")
    _, database = urls(None, database_url)

    async def run() -> bool:
        import asyncpg

        conn = await asyncpg.connect(database)
        try:
            return await website_repository.grant(conn, role, os.environ.get(PASSWORD_VARIABLE), practice_boards)
        finally:
            await conn.close()

    try:
        created = asyncio.run(run())
    except OSError as exc:
        raise fail(f"cannot reach the database: {exc}") from exc
    except Exception as exc:  # asyncpg's errors: no right to create roles, a missing schema (not migrated yet)
        raise fail(f"the database refused: {exc}") from exc
    typer.echo(f"{'Created' if created else 'Updated'} role {role}: reads the leaderboard schema, writes sign-in's "
               f"web ids")


def register(app: typer.Typer) -> None:
    app.command("website-role")(website_role)
