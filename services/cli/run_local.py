"""`kernelbot run-local FILE --problem DIR [--mode M]`: reproduce a server result on this machine.

The same path a server run takes, minus the platform: the problem directory is loaded as sync loads it, the
payload is built as the dispatcher builds it (public seed, never a secret one), and the runner executes it with the
same harness in the same sandbox. The report is the one the gateway shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

MODES = ("test", "benchmark", "leaderboard", "profile")


def run_local_command(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True, help="your submission")],
    problem: Annotated[Path, typer.Option("--problem", "-p", exists=True, file_okay=False,
                                          help="problem directory holding task.yml")],
    mode: Annotated[str, typer.Option("--mode", "-m", help="test | benchmark | leaderboard | profile")] = "test",
    no_sandbox: Annotated[bool, typer.Option("--no-sandbox", help="run the harness unconfined")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the FullResult as JSON instead of the report")] = False,
) -> None:
    """Run a submission against a local problem with the server's harness and print the report."""
    from runner.confinement.sandbox import SandboxPolicy
    from runner.host.sysinfo import collect_system_info
    from runner.stages.execute import execute
    from runner.task.payload import build_payload
    from runner.task.taskfile import TaskFileError, load_problem
    from services.core.presentation import reports

    if mode not in MODES:
        raise typer.BadParameter(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}", param_hint="--mode")
    try:
        task = load_problem(problem.resolve()).task
        code = file.read_text(encoding="utf-8")
    except (TaskFileError, OSError, UnicodeDecodeError) as exc:
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(2) from exc
    gpu = collect_system_info().gpu or "cpu"
    payload = build_payload(task, code, run_id=f"local-{file.stem}", gpu=gpu, mode=mode, secret=False,
                            seed=task.seed)
    result = execute(payload, sandbox=None if no_sandbox else SandboxPolicy())
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        typer.echo(reports.report(gpu, "local", mode, secret=False, result=result.model_dump(mode="json")))
    if not (result.success and all(stage.run is not None and stage.run.success and stage.run.passed
                                   for stage in result.runs.values())):
        raise typer.Exit(1)
