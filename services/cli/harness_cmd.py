"""`kernelbot harness identify FILE...`: whether a problem's eval.py is a known stock reference-kernels harness, which
our harness may replace (runner/task/harness_choice.py), and its SHA-256 for review."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

harness_app = typer.Typer(help="Which harness judges a problem.", no_args_is_help=True)


@harness_app.command("identify")
def identify(paths: Annotated[list[Path], typer.Argument(help="eval.py files to identify")]) -> None:
    """Print each file's SHA-256 and whether it is a known stock harness."""
    from runner.task.harness_choice import content_sha256, known_stock_versions, not_ours

    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise typer.BadParameter(f"cannot read {path}: {exc}") from exc
        sha = content_sha256(text)
        known = known_stock_versions().get(sha)
        verdict = f"stock: {known}" if known else f"{not_ours(path.name, sha)}: the problem keeps it, unprotected"
        typer.echo(f"{sha}  {path}  {verdict}")


def register(app: typer.Typer) -> None:
    app.add_typer(harness_app, name="harness")
