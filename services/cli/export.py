"""`kernelbot export`: a leaderboard's ranked submissions as an open data set."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from services.cli.options import DatabaseUrl, fail, urls


def export(
    leaderboard: Annotated[str, typer.Option("--leaderboard", "-l")],
    format_: Annotated[str, typer.Option("--format", "-f", help="parquet | jsonl")] = "parquet",
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write (default: <board>.<format>)")] = None,
    gpu: Annotated[str, typer.Option("--gpu", "-g", help="Only this GPU")] = None,
    include_closed: Annotated[bool, typer.Option(help="Export a closed leaderboard too")] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """Write every ranked submission of a leaderboard: code, score, rank; never secret runs."""
    from services.core.opendata import exports
    from services.operate.db import connection

    if format_ not in exports.WRITERS:
        raise fail(f"unknown format {format_!r}; choose parquet or jsonl")
    _, database = urls(None, database_url)

    async def read() -> list[dict]:
        async with connection(database) as conn:
            return await exports.ranked_rows(conn, leaderboard, gpu, include_closed)

    try:
        rows = asyncio.run(read())
    except exports.ExportError as exc:
        raise fail(str(exc)) from exc
    path = output or Path(f"{leaderboard}.{format_}")
    exports.WRITERS[format_](rows, path)
    typer.echo(f"Wrote {len(rows)} ranked submissions of {leaderboard} to {path}")
