"""`kernelbot users rotate-cli-id`: give users new CLI ids; their old ids stop authenticating.

For named users (an id leaked, someone asks), and with --exposed for every user whose current id the event stream
still holds in clear: user events recorded before CLI ids were hashed carry them so, and exports and backups of that
time too. Rotating is the remedy for those copies: the id they hold no longer opens anything.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import Annotated

import typer

from services.cli.options import DatabaseUrl, NatsUrl, fail, urls

users_app = typer.Typer(help="Users' credentials.", no_args_is_help=True)
USER_EVENTS = "evt.user.>"


async def clear_ids_in_stream(nats_url: str) -> tuple[set[str], set[str]]:
    """Digests of the CLI ids and of the web ids that user events in the stream carry in clear."""
    from schemas.credentials import cli_id_hash
    from services.operate import stream as log

    cli_ids, web_ids = set(), set()
    async with log.connected(nats_url) as client:
        async for message in log.read_subject(client, USER_EVENTS):
            try:
                data = json.loads(message.data)
            except ValueError:
                continue  # not an event of ours: nothing to find in it
            if not isinstance(data, dict):
                continue
            for field, found in (("cli_id", cli_ids), ("web_auth_id", web_ids)):
                if isinstance(data.get(field), str):
                    found.add(cli_id_hash(data[field]))
    return cli_ids, web_ids


@users_app.command("rotate-cli-id")
def rotate_cli_id(
    user_ids: Annotated[list[str], typer.Argument(help="The users to give a new CLI id")] = None,
    exposed: Annotated[bool, typer.Option(
        help="Also every user whose current CLI id the event stream holds in clear (recorded before ids were hashed)")
    ] = False,
    wait: Annotated[float, typer.Option(help="Seconds to wait until the new ids work")] = 30.0,
    nats_url: NatsUrl = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Issue new CLI ids, printed once as `USER_ID<TAB>CLI_ID` lines to hand over; the old ids stop working."""
    from schemas.credentials import cli_id_hash
    from schemas.events import CliUserRegistered
    from services.cli import users_repository as repository
    from services.core.infrastructure import settle
    from services.kit.bus import publish_all
    from services.operate.db import connection

    if not user_ids and not exposed:
        raise fail("name the users to rotate, or pass --exposed")
    nats, database = urls(nats_url, database_url)

    async def run() -> None:
        async with connection(database) as conn:
            rows = list(await repository.by_id(conn, user_ids or []))
            missing = set(user_ids or []) - {r["user_id"] for r in rows}
            if missing:
                raise fail(f"no such user: {', '.join(sorted(missing))}")
            if exposed:
                named = {r["user_id"] for r in rows}
                cli_digests, web_digests = await clear_ids_in_stream(nats)
                leaked = await repository.by_cli_digest(conn, sorted(cli_digests))
                rows += [r for r in leaked if r["user_id"] not in named]
                web_users = [r["user_id"] for r in await repository.by_web_digest(conn, sorted(web_digests))]
                if web_users:  # the web front end chose them: only it can hand out new ones
                    typer.echo(f"The stream holds the current web ids of {', '.join(web_users)} in clear; give them "
                               "new ones with POST /admin/users (web_auth_id).", err=True)
            if not rows:
                typer.echo("No CLI id to rotate: the stream holds none in clear that still works.", err=True)
                return
            issued = [(r["user_id"], r["user_name"], secrets.token_urlsafe(24)) for r in rows]
            # the current name goes with it: the event also sets the name shown for the user
            await publish_all(nats, [CliUserRegistered(user_id=user, user_name=name, cli_id_sha256=cli_id_hash(new))
                                     for user, name, new in issued])
            for user, _, new in issued:
                typer.echo(f"{user}\t{new}")
            users, digests = [i[0] for i in issued], [cli_id_hash(i[2]) for i in issued]

            async def settled() -> bool:
                return await repository.holding(conn, users, digests) == len(issued)

            if not await settle.until(settled, wait, poll_s=0.1):
                raise fail(f"the new ids were published but not projected within {wait:.0f}s; is the ledger running?")
            typer.echo(f"Rotated {len(issued)} CLI ids; the old ones no longer authenticate.", err=True)

    asyncio.run(run())


def register(app: typer.Typer) -> None:
    app.add_typer(users_app, name="users")
