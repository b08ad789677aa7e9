"""The `kernelbot` command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from services.cli import (
    client,
    conformance,
    dlq,
    events_cmd,
    export,
    harness_cmd,
    host_check,
    import_upstream,
    precheck,
    problems,
    rejudge,
    runners,
    toolchain_cmd,
    users_cmd,
    website_cmd,
)
from services.cli.run_local import run_local_command
from services.core.rules import noise

app = typer.Typer(help="KernelBot: compete at writing fast GPU kernels.", no_args_is_help=True)
leaderboard_app = typer.Typer(help="Read leaderboards.", no_args_is_help=True)
app.add_typer(leaderboard_app, name="leaderboard")
app.command("run-local")(run_local_command)
app.add_typer(problems.problems_app, name="problems")
app.add_typer(toolchain_cmd.toolchain_app, name="toolchain")
# operator commands: events, rejudge, dlq, export
app.add_typer(events_cmd.events_app, name="events")
app.add_typer(dlq.dlq_app, name="dlq")
app.command()(rejudge.rejudge)
app.command("export")(export.export)
app.command("import-upstream")(import_upstream.import_upstream)
runners.register(app)  # operator commands: runners, verify-runs
app.command("host-check")(host_check.host_check)  # a GPU vendor's isolation check on its own host
precheck.register(app)  # operator commands: precheck rules, precheck clear
conformance.register(app)  # runner-host command: conformance
harness_cmd.register(app)  # operator command: harness identify
users_cmd.register(app)  # operator command: users rotate-cli-id
website_cmd.register(app)  # operator command: website-role

Url = Annotated[str, typer.Option(help="Gateway URL (default: KB_URL, else http://127.0.0.1:8000)")]
SERVICE_NAMES = ("gateway", "dispatcher", "scorer", "ledger", "discord")


@app.command()
def up(
    data_dir: Annotated[Path, typer.Option(help="Where NATS, Postgres and runs keep their data")] = None,
    port: Annotated[int, typer.Option(help="Gateway port")] = 8000,
    dev: Annotated[bool, typer.Option("--dev", help="Development mode (KB_DEVELOPMENT_MODE): rank runs this "
                                                    "machine could not fully isolate, marked as such")] = False,
) -> None:
    """Start the whole platform on this machine (its own NATS and Postgres unless KB_NATS_URL/KB_DATABASE_URL)."""
    from services.cli.up import run_up
    from services.kit.upstream_env import ConflictingSettings

    try:
        run_up((data_dir or client.default_data_dir()).resolve(), port, typer.echo, dev)
    except ConflictingSettings as exc:
        raise SystemExit(f"kernelbot up: {exc}") from None


@app.command()
def serve(name: Annotated[str, typer.Argument(help="gateway | dispatcher | scorer | ledger | discord")],
          debug: Annotated[bool, typer.Option("--debug", help="discord: the staging bot (KB_DISCORD_DEBUG_TOKEN, "
                                                                "KB_DISCORD_DEBUG_GUILD_ID)")] = False) -> None:
    """Run one service in the foreground."""
    if name not in SERVICE_NAMES:
        raise typer.BadParameter(f"unknown service {name!r}; choose one of {', '.join(SERVICE_NAMES)}")
    from services.kit.settings import WeakSecret
    from services.kit.upstream_env import ConflictingSettings

    try:
        _serve(name, debug)
    except (ConflictingSettings, WeakSecret) as exc:  # refused before anything starts
        raise SystemExit(f"kernelbot serve {name}: {exc}") from None


def _serve(name: str, debug: bool = False) -> None:
    from services.cli.service_settings import settings_class
    from services.kit import jsonlog
    from services.kit.settings import refuse_weak_secrets

    # the service's own settings first: a setting named both ours and upstream's way stops it here, and so does a
    # placeholder or short admin token or session secret
    settings = settings_class(name)()
    refuse_weak_secrets(settings)
    jsonlog.configure(name, settings.log_level)
    if name == "gateway":
        import uvicorn

        from services.gateway.app import create_app

        # uvicorn would trust X-Forwarded-For from 127.0.0.1 unless told otherwise: only from configured proxies.
        uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="warning",
                    access_log=False, proxy_headers=bool(settings.trusted_proxies),
                    forwarded_allow_ips=settings.trusted_proxies or None)
        return
    if name == "discord":
        from services.discord.app import serve as serve_discord

        serve_discord(settings.model_copy(update={"discord_debug": True}) if debug else settings)
        return
    import uvloop

    module = __import__(f"services.{name}.app", fromlist=["create_app"])
    # libuv's loop, as the gateway's: a consumer's cost per message is largely the loop's and its transports'
    uvloop.run(module.create_app(settings).run())


def _print_view(view: dict) -> None:
    job = view.get("job") or {}
    typer.echo(f"  status: {job.get('status')}  runs recorded: {len(view['runs'])}")


def _print_result(view: dict) -> None:
    for run in view["runs"]:
        secret = " (secret)" if run["secret"] else ""
        verdict = "passed" if run["passed"] else "failed"
        score = f"  score {run['score']:.9f} s" if run.get("score") is not None else ""
        typer.echo(f"  {run['runner']} {run['mode']}{secret}: {verdict}{score}")
    job = view.get("job") or {}
    typer.echo(f"Submission {view['id']} {job.get('status')}" + (f": {job['error']}" if job.get("error") else ""))


@app.command()
def submit(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    leaderboard: Annotated[str, typer.Option("--leaderboard", "-l")],
    gpu: Annotated[str, typer.Option("--gpu", "-g")] = "cpu",
    mode: Annotated[str, typer.Option("--mode", "-m", help="test | benchmark | leaderboard")] = "test",
    url: Url = None,
    cli_id: Annotated[str, typer.Option(help="CLI id (default: KB_CLI_ID, else the one kernelbot up stored)")] = None,
) -> None:
    """Submit a kernel, follow it live, and show the result."""
    url = url or client.default_url()
    ident = client.cli_id(cli_id)
    try:
        accepted = client.submit(url, ident, file, leaderboard, gpu, mode)
        submission_id = accepted["details"]["id"]
        queue = accepted.get("runner_queue") or {}
        typer.echo(f"Submission {submission_id} accepted. {queue.get('runner', '')} {gpu} queue: "
                   f"{queue.get('queued_jobs')} queued jobs.")
        view = client.follow(url, ident, submission_id, _print_view)
    except client.ApiError as exc:
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(1) from exc
    _print_result(view)
    if (view.get("job") or {}).get("status") != "succeeded":
        raise typer.Exit(1)


@leaderboard_app.command("show")
def leaderboard_show(name: str, gpu: Annotated[str, typer.Option("--gpu", "-g")] = "cpu", url: Url = None) -> None:
    """Print the ranking of a leaderboard on one GPU."""
    try:
        rows = client.ranking(url or client.default_url(), name, gpu)
        harness = next((board.get("harness") for board in client.leaderboards(url or client.default_url())
                        if board["name"].lower() == name.lower()), None)
    except client.ApiError as exc:
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(1) from exc
    if harness:
        verdict = "protected" if harness.get("protected") else "UNPROTECTED"
        typer.echo(f"harness: {verdict}: {harness.get('reason')}")
    if not rows:
        typer.echo(f"No ranked submissions on {name} ({gpu}) yet.")
        return
    typer.echo(f"  {'rank':>4}  {'user':<20} {'score (s)':>14}  {'95% interval (s)':>26}  {'submission':>10}  "
               "submitted")
    for row in rows:
        # the API's tie rule (services/core/rules/noise.py), marked as every front end marks it
        mark = noise.TIE_MARK if row.get("tied_within_noise") else " "
        interval = row.get("score_interval")
        shown = f"[{interval[0]:.9f}, {interval[1]:.9f}]" if interval else "—"
        typer.echo(f"{mark} {row['rank']:>4}  {row['user_name'][:20]:<20} {row['submission_score']:>14.9f}  "
                   f"{shown:>26}  {row['submission_id']:>10}  {row['submission_time']}")
    if any(row.get("tied_within_noise") for row in rows):
        typer.echo(noise.TIE_LEGEND)
