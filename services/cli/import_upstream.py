"""`kernelbot import-upstream DATABASE_URL`: move an upstream KernelBot deployment's history onto this platform."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated

import typer

from services.cli.options import DatabaseUrl, NatsUrl, fail, urls


def import_upstream(
    source: Annotated[str, typer.Argument(help="Postgres URL of the upstream deployment's database (read only)")],
    report: Annotated[Path, typer.Option(help="Where to write the report of what could not be mapped")] = Path(
        "upstream-import-report.txt"),
    nats_url: NatsUrl = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Publish an upstream deployment's boards, users, submissions, invites, rate limits and bans as events.

    Run it again to resume an interrupted import: what the stream already holds is skipped.
    """
    # late: the command line starts without loading the database and NATS clients each command does not need
    from services.operate.upstream_import import ImportRefused
    from services.operate.upstream_import import import_upstream as run

    nats, database = urls(nats_url, database_url)
    bars: list = []

    def start(total: int):
        bar = typer.progressbar(length=total, label="Importing from upstream", file=None)
        bars.append(bar.__enter__())
        return bars[-1].update

    began = time.monotonic()
    try:
        found, publisher = asyncio.run(run(source, nats, database, start))
    except ImportRefused as exc:
        raise fail(str(exc)) from exc
    except LookupError as exc:
        raise fail(str(exc)) from exc
    finally:
        for bar in bars:
            bar.__exit__(None, None, None)
    report.write_text(found.text(), encoding="utf-8")
    typer.echo(found.text())
    typer.echo(f"Published {publisher.published} events ({publisher.skipped} already there) in "
               f"{time.monotonic() - began:.1f} s; report written to {report}")
