"""`kernelbot conformance`: the runner-host conformance suite (runner/conformance), one line per check."""

from __future__ import annotations

from typing import Annotated

import typer


def conformance(
    only: Annotated[list[str], typer.Option("--only", help="Run only this check (repeatable)")] = None,
    repeats: Annotated[int, typer.Option(help="Benchmark runs of the timing-noise check")] = 10,
) -> None:
    """Check this runner host: bundled CUDA problem, exploit suite on the CUDA paths, timing noise, NCCL."""
    from runner.conformance import CHECKS, HostCapabilities, run_checks, summary_line

    unknown = sorted(set(only or []) - set(CHECKS))
    if unknown:
        raise typer.BadParameter(f"unknown check {unknown[0]!r}; choose from {', '.join(CHECKS)}")
    if repeats < 2:
        raise typer.BadParameter("--repeats must be at least 2 (a CV needs two runs)")
    host = HostCapabilities.detect()
    typer.echo(f"KernelBot conformance on {host.describe()}")
    results = run_checks(only or None, repeats, host, on_result=lambda result: typer.echo(result.line()))
    typer.echo(summary_line(results, host.describe()))
    if any(result.status == "fail" for result in results):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("conformance")(conformance)
