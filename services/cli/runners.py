"""Operator commands for the GPU backends: `kernelbot runners` and `kernelbot verify-runs`."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Annotated

import asyncpg
import typer

from problems import PROBLEMS_ROOT
from services.cli import client
from services.cli import runners_repository as repository

DatabaseUrl = Annotated[str, typer.Option(help="Postgres URL (default: KB_DATABASE_URL)")]
KNOWN_PROBLEM = "identity_py"


def _database_url(explicit: str | None) -> str:
    from services.kit.settings import ServiceSettings

    return explicit or ServiceSettings().database_url


async def _read(database_url: str, read):
    conn = await asyncpg.connect(database_url)
    try:
        return await read(conn)
    finally:
        await conn.close()


def runners(database_url: DatabaseUrl = None,
            jobs: Annotated[bool, typer.Option("--jobs/--no-jobs", help="List each running job")] = True) -> None:
    """Each GPU: its backend, queue depth and running jobs, as the dispatchers record them; then the default GPUs
    that are inactive, with what each one lacks."""
    url = _database_url(database_url)

    async def read(conn):
        return await repository.gpu_loads(conn), await repository.running_jobs(conn)

    loads, running = asyncio.run(_read(url, read))
    if not loads:
        typer.echo("No GPUs: no dispatcher has started against this database yet.")
        return
    active = [load for load in loads if load.lacks is None]
    typer.echo(f"active: {len(active)} GPU(s)")
    typer.echo(f"{'gpu':<16} {'backend':<10} {'target':<28} {'arch':<6} {'slots':>5} {'queued':>6} {'running':>7}")
    for load in active:
        backend = load.backend or "NONE"  # queued runs that no dispatcher will take
        typer.echo(f"{load.gpu[:16]:<16} {backend:<10} {load.target[:28]:<28} {load.arch or '-':<6} "
                   f"{load.slots if load.slots is not None else '-':>5} {load.queued:>6} {load.running:>7}")
    inactive = [load for load in loads if load.lacks is not None]
    if inactive:
        typer.echo(f"\ninactive: {len(inactive)} GPU(s) of the default catalogue, each lacking its backend's "
                   f"credentials")
        for load in inactive:
            waiting = f" ({load.queued} run(s) waiting)" if load.queued else ""
            typer.echo(f"{load.gpu[:16]:<16} {load.backend:<10} lacks {load.lacks}{waiting}")
    if jobs and running:
        typer.echo("\nrunning jobs:")
        for job in running:
            typer.echo(f"  {job.run_id}  {job.backend} job {job.job_ref}  attempt {job.attempts}  "
                       f"since {job.launched_at:%Y-%m-%d %H:%M:%S}  watched by {job.lease_owner or '-'}")


def start_up(timing: dict) -> str:
    """`<stage start-up> s (warm|cold)`: from the stage's process start to the harness's first result line, which
    covers the interpreter, imports (torch), the CUDA context and the worker's start. A later stage of a chain
    (all stages in one harness process, runner/launching/chain.py) shows `(warm, chained)`: its start-up runs from the
    moment the runner sent it, so it is what the stage costs beyond the first."""
    try:
        seconds = (datetime.fromisoformat(timing["harness_started"])
                   - datetime.fromisoformat(timing["process_started"])).total_seconds()
    except (KeyError, ValueError):
        return "start-up unknown"
    chained = ", chained" if timing.get("chained") == "true" else ""
    return f"start-up {seconds:.3f} s ({timing.get('start', '?')}{chained})"


def _stage_report(database: str, submission_id: int) -> str:
    try:
        rows = asyncio.run(_read(database, lambda conn: repository.stage_timings(conn, submission_id)))
    except (OSError, asyncpg.PostgresError) as exc:
        return f"stage start-up unknown ({exc})"
    return "; ".join(f"{stage} {start_up(timing)}" for _, stage, timing in rows) or "no stage reported"


def _verdict(view: dict) -> tuple[bool, str]:
    job = view.get("job") or {}
    status = job.get("status", "?")
    if status == "succeeded" and view["runs"] and all(run["passed"] for run in view["runs"]):
        return True, "passed"
    return False, f"{status}: {job.get('error') or 'runs did not pass'}"


def verify_runs(
    leaderboard: Annotated[str, typer.Option(help="A board whose GPUs are the ones to check")] = KNOWN_PROBLEM,
    gpu: Annotated[list[str], typer.Option(help="Only these GPUs (default: every GPU of the board a "
                                                "dispatcher serves)")] = None,
    file: Annotated[Path, typer.Option(help="The known-good solution to run")] = None,
    url: Annotated[str, typer.Option(help="Gateway URL (default: KB_URL)")] = None,
    cli_id: Annotated[str, typer.Option(help="CLI id (default: KB_CLI_ID)")] = None,
    database_url: DatabaseUrl = None,
    timeout_s: Annotated[float, typer.Option(help="Give up on a GPU after this long")] = 1800,
) -> None:
    """Submit a known problem to every configured backend and report each one's result and the start-up time of
    each stage (process start to the harness's first result line; warm: forked from a warm runner)."""
    url = url or client.default_url()
    ident = client.cli_id(cli_id)
    file = file or PROBLEMS_ROOT / "examples" / KNOWN_PROBLEM / "submission.py"
    database = _database_url(database_url)

    async def read(conn):
        return await repository.board_gpus(conn, leaderboard), await repository.gpu_loads(conn)

    board_gpus, loads = asyncio.run(_read(database, read))
    if board_gpus is None:
        typer.echo(f"Error: no leaderboard {leaderboard!r}", err=True)
        raise typer.Exit(2)
    backends = {load.gpu: load.backend for load in loads if load.served}
    chosen = gpu or [name for name in board_gpus if name in backends]
    if not chosen:
        typer.echo(f"Error: no GPU of {leaderboard} is served by a dispatcher", err=True)
        raise typer.Exit(2)

    def check(name: str) -> tuple[str, bool, str]:
        try:
            accepted = client.submit(url, ident, file, leaderboard, name, "test")
            view = client.follow(url, ident, accepted["details"]["id"], lambda _view: None, limit_s=timeout_s)
        except client.ApiError as exc:
            return name, False, f"error: {exc}"
        ok, detail = _verdict(view)
        return name, ok, f"{detail}; {_stage_report(database, accepted['details']['id'])}"

    with ThreadPoolExecutor(max(1, len(chosen))) as pool:  # every backend at once, like a real verification
        results = list(pool.map(check, chosen))
    for name, ok, detail in results:
        typer.echo(f"{'OK  ' if ok else 'FAIL'} {name:<16} {backends.get(name, '?'):<10} {detail}")
    # A served GPU the board does not list was not checked: say so rather than let silence read as a pass.
    for name in [] if gpu else sorted(set(backends) - set(chosen)):
        typer.echo(f"SKIP {name:<16} {backends[name]:<10} not a GPU of {leaderboard}; pass --leaderboard to check it")
    if not all(ok for _, ok, _ in results):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("runners")(runners)
    app.command("verify-runs")(verify_runs)
