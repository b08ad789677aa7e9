"""`kernelbot problems sync PATH`: load a reference-kernels-style checkout onto a running platform.

The checkout's `problems/` travels to the admin API as one archive and is planned there
(docs/authoring.md "Loading problems onto a server", the same rules as `popcorn-cli admin update-problems`), so what the
platform stores was validated by the platform.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path
from typing import Annotated

import httpx
import typer

from services.cli import client
from services.cli.problems_check import check_problems, dispatcher_catalogue
from services.dispatcher.catalogue import CatalogueError

problems_app = typer.Typer(help="Load problem sets onto the platform (admin).", no_args_is_help=True)
# Upload bound of the gateway's multipart limit (docs/http-api.md "Limits"), minus room for the multipart framing.
MAX_ARCHIVE_BYTES = 1_990_000
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules"})
# Skips that mean "nothing to do" rather than "this problem is broken".
BENIGN_SKIPS = ("no changes", "significant task changes require --force")


def problems_dir(path: Path) -> Path:
    """PATH is a checkout holding `problems/`, or that `problems/` directory itself."""
    if (path / "problems").is_dir():
        return path / "problems"
    if path.is_dir() and any(path.glob("*.yaml")):
        return path
    raise typer.BadParameter(f"{path} holds no problems/ directory and no competition *.yaml files")


def _text(path: Path) -> bytes | None:
    """The file's bytes when it is UTF-8 text: task files are read as text, so nothing else can be one."""
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return data


def archive(root: Path) -> bytes:
    """A tar.gz of `root`'s text files as `problems/...`; hidden entries, caches, links and binaries are left out."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for current, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
            for name in sorted(files):
                path = Path(current) / name
                if name.startswith(".") or path.is_symlink() or not path.is_file():
                    continue
                data = _text(path)
                if data is None:
                    continue
                info = tarfile.TarInfo(str(Path("problems") / path.relative_to(root)))
                info.size, info.mtime, info.mode = len(data), int(path.stat().st_mtime), 0o644
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def report_lines(report: dict) -> tuple[list[str], bool]:
    """The create/update/skip/error lines of a sync report, and whether anything failed."""
    lines = [f"created  {name}" for name in report.get("created", [])]
    lines += [f"updated  {name}" for name in report.get("updated", [])]
    skipped = broken = 0
    for skip in report.get("skipped", []):
        benign = skip.get("reason") in BENIGN_SKIPS
        skipped, broken = skipped + benign, broken + (not benign)
        lines.append(f"{'skipped' if benign else 'error  '}  {skip.get('name')}: {skip.get('reason')}")
    lines += [f"error    {item.get('name')}: {item.get('error')}" for item in report.get("errors", [])]
    for name, harness in sorted(report.get("harness", {}).items()):
        verdict = "protected" if harness.get("protected") else "UNPROTECTED"
        lines.append(f"harness  {name}: {verdict}: {harness.get('reason')}")
    # A problem the platform skipped because it is broken counts as an error, as its line says.
    errors = broken + len(report.get("errors", []))
    lines.append(f"{len(report.get('created', []))} created, {len(report.get('updated', []))} updated, "
                 f"{skipped} skipped, {errors} errors")
    return lines, errors > 0


def _checked(response: httpx.Response) -> dict:
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.is_success and isinstance(body, dict):
        return body
    detail = body.get("detail") if isinstance(body, dict) else response.text
    raise client.ApiError(f"{response.status_code}: {detail}")


@problems_app.command("sync")
def sync(
    path: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="reference-kernels-style checkout")],
    problem_set: Annotated[str | None, typer.Option("--problem-set", help="only problems/<NAME>.yaml")] = None,
    force: Annotated[bool, typer.Option("--force", help="apply scoring-relevant task changes too")] = False,
    closed: Annotated[bool, typer.Option("--closed", help="create new leaderboards closed (invite only)")] = False,
    url: Annotated[str | None, typer.Option(help="Gateway URL (default: KB_URL, else http://127.0.0.1:8000)")] = None,
) -> None:
    """Create, update or skip a leaderboard for every problem of the checkout's competition files."""
    token = os.environ.get("KB_ADMIN_TOKEN", "")
    if not token:
        typer.echo("Error: set KB_ADMIN_TOKEN to the platform's admin token.", err=True)
        raise typer.Exit(2)
    data = archive(problems_dir(path))
    if len(data) > MAX_ARCHIVE_BYTES:
        typer.echo(f"Error: the problems archive is {len(data)} bytes, more than the {MAX_ARCHIVE_BYTES} the "
                   "gateway accepts; remove large files that no task.yml names.", err=True)
        raise typer.Exit(2)
    params = {"force": str(force).lower(), "visibility": "closed" if closed else "public"}
    if problem_set:
        params["problem_set"] = problem_set
    try:
        with httpx.Client(base_url=url or client.default_url(), timeout=120) as http:
            response = http.post("/admin/problems/sync", params=params, headers={"Authorization": f"Bearer {token}"},
                                 files={"file": ("problems.tar.gz", data)})
        report = _checked(response)
    except (client.ApiError, httpx.HTTPError) as exc:
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(1) from exc
    lines, failed = report_lines(report)
    for line in lines:
        typer.echo(line)
    if failed:
        raise typer.Exit(1)


@problems_app.command("check")
def check(
    path: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="reference-kernels-style checkout")],
    catalogue: Annotated[str | None, typer.Option(
        help="GPU catalogue file or JSON in place of KB_GPU_CATALOGUE (default: the dispatcher's)")] = None,
) -> None:
    """Check every problem before any GPU sees it: its GPUs resolve in the catalogue, the image of each supports its
    language and provides every module its reference, harness and templates import. One line per problem."""
    try:
        resolved = dispatcher_catalogue(catalogue)
    except CatalogueError as exc:
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(2) from exc
    checks = check_problems(problems_dir(path), resolved)
    for result in checks:
        typer.echo(result.line())
    failed = sum(not result.ok for result in checks)
    typer.echo(f"{len(checks) - failed} ok, {failed} failed")
    if failed or not checks:
        raise typer.Exit(1)
