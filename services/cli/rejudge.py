"""`kernelbot rejudge`: recompute a leaderboard under the rules or the harness now in force, as events."""

from __future__ import annotations

import asyncio
import getpass
from typing import Annotated

import typer

from services.cli.options import DatabaseUrl, NatsUrl, fail, urls


def _describe(move) -> str:
    def at(place):
        return f"#{place[0]} ({place[1]:.9f} s)" if place else "off the board"

    return f"  {move.user_name:<20} submission {move.submission_id:>8}: {at(move.before)} -> {at(move.after)}"


def rejudge(
    leaderboard: Annotated[str, typer.Option("--leaderboard", "-l", help="The leaderboard to rejudge")],
    gpu: Annotated[str, typer.Option("--gpu", "-g", help="Only this GPU (default: every GPU of the board)")] = None,
    rescore: Annotated[bool, typer.Option(help="Recompute scores from the stored results under today's rule")] = False,
    rerun: Annotated[bool, typer.Option(help="Run the ranked submissions again under today's harness")] = False,
    dry_run: Annotated[bool, typer.Option(help="Print what would change; change nothing")] = False,
    same_hardware: Annotated[bool, typer.Option(
        help="Compare only scores measured on the board's reference hardware (fingerprint); withdraw the others")
    ] = False,
    reason: Annotated[str, typer.Option(help="Why, for the audit trail")] = "",
    wait: Annotated[float, typer.Option(help="Seconds to wait for a rescore to complete")] = 120.0,
    nats_url: NatsUrl = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Rejudge a leaderboard: --rescore or --rerun, recorded as events so the board stays auditable."""
    from services.core.readmodel import operator_reads
    from services.kit.bus import publish_all
    from services.operate import rejudging
    from services.operate.db import connection

    if rescore == rerun:
        raise fail("choose exactly one of --rescore and --rerun")
    if same_hardware and rerun:
        raise fail("--same-hardware compares stored scores: use it with --rescore")
    action = "rescore" if rescore else "rerun"
    nats, database = urls(nats_url, database_url)

    async def run() -> None:
        async with connection(database) as conn:
            try:
                request = await rejudging.build_request(conn, leaderboard, gpu, action, getpass.getuser(), reason,
                                                        same_hardware)
            except rejudging.RejudgeError as exc:
                raise fail(str(exc)) from exc
            gpus = [gpu] if gpu else list((await operator_reads.board(conn, leaderboard))["gpus"])
            if action == "rescore" and not same_hardware:
                for board_gpu, kinds in sorted((await rejudging.hardware_spread(conn, request.leaderboard)).items()):
                    if len(kinds) > 1:
                        typer.echo(f"Warning: the scores on {board_gpu} were measured on {len(kinds)} hardware "
                                   "configurations; --same-hardware compares only those on the board's own.")
            if dry_run:
                if action == "rerun":
                    count = await rejudging.rerun_candidates(conn, request)
                    typer.echo(f"Would run {count} ranked submissions of {request.leaderboard} again "
                               f"under task {request.task_hash[:12] or '(unhashed)'}; nothing changed.")
                    return
                moves = await rejudging.preview(conn, request, gpus)
                hardware = " on the board's reference hardware only" if same_hardware else ""
                typer.echo(f"Dry run: rescoring {request.leaderboard} by `{request.ranking_by}`{hardware} would "
                           "change:")
                for board_gpu, changes in moves.items():
                    typer.echo(f" {board_gpu}: " + ("no rank changes" if not changes else f"{len(changes)} changes"))
                    for move in changes:
                        typer.echo(_describe(move))
                typer.echo("Nothing was changed.")
                return
            await publish_all(nats, [request])
            typer.echo(f"Requested {action} {request.rejudge_id}")
            if action == "rerun":
                typer.echo("Runs are queued; each submission's score is revised as its runs end "
                           f"(`kernelbot events tail --type ScoreRevised --leaderboard {request.leaderboard}`).")
                return
            try:
                done = await rejudging.wait_for_completion(conn, request.rejudge_id, wait)
            except rejudging.RejudgeError as exc:
                raise fail(str(exc)) from exc
            typer.echo(f"Rescored {done['submissions']} submissions of {done['leaderboard']}: "
                       f"{done['revised']} scores revised.")

    asyncio.run(run())
