"""`kernelbot toolchain`: render the manifests into deploy/, and check what can be checked without a GPU.

- `render [--check]`: write (or compare) every file the manifests render into (services/cli/toolchain_render.py).
- `pins [--family F]`: every Python pin resolves to a binary wheel for the image's platform and Python version, as
  pip resolves it without installing (`pip install --dry-run --no-deps --only-binary=:all: --platform ...`). A pin
  whose index does not answer from here is reported as unchecked with the reason, never as passed.
- `sources [--local NAME=GITDIR]`: every header and source repository has its pinned tag or commit, asked with
  `git ls-remote` / a shallow fetch, or from a local clone where the network cannot reach the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Annotated

import typer

from runner.task.toolchain import FAMILIES, Toolchain, distribution, load
from services.cli import toolchain_render

toolchain_app = typer.Typer(help="The runner images' toolchain manifests (docs/toolchains.md).", no_args_is_help=True)
PYPI = "https://pypi.org/simple"
# Linux x86-64 wheels an Ubuntu 24.04 image (glibc 2.39) can install.
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(5, 40)] + ["manylinux2010_x86_64",
                                                                          "manylinux2014_x86_64", "linux_x86_64"]
PROBE_TIMEOUT_S = 15


def reachable(index: str, name: str) -> str | None:
    """None when the index answers for `name`; else why not, in a few words."""
    url = f"{index.rstrip('/')}/{name}/"
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as response:  # noqa: S310 - fixed https indexes
            response.read(1)
        return None
    except urllib.error.HTTPError as exc:
        return None if exc.code == 404 else f"{url} answered {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return f"{url} is unreachable from here ({getattr(exc, 'reason', exc)})"


def resolve(toolchain: Toolchain, requirements: list[str], index: str) -> dict[str, str]:
    """What pip resolves each requirement to for the image's platform: distribution -> version (absent: failed)."""
    with tempfile.TemporaryDirectory(prefix="kb-pins-") as scratch:
        report = Path(scratch) / "report.json"
        argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
                "--only-binary=:all:", *[f"--platform={platform}" for platform in PLATFORMS],
                f"--python-version={toolchain.python}", "--implementation=cp", f"--target={scratch}/target",
                f"--report={report}", f"--index-url={index}", "--quiet", *requirements]
        # This machine's pip configuration (constraints, local wheel folders) must not colour the answer.
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"},
               "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)
        if done.returncode != 0 or not report.exists():
            return {"": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"pip exited {done.returncode}"}
        installs = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in installs}


def check_pins(toolchain: Toolchain) -> list[tuple[str, str, str]]:
    """(requirement, "ok" | "fail" | "unchecked", detail) for every pin of the manifest."""
    groups = {PYPI: [line for line in toolchain.requirements()
                     if distribution(line.split("==")[0]) not in toolchain.index_packages]}
    if toolchain.index_url:
        groups[toolchain.index_url] = toolchain.requirements(toolchain.index_packages)
    rows = []
    for index, requirements in groups.items():
        if not requirements:
            continue
        unreachable = reachable(index, distribution(requirements[0].split("==")[0]))
        if unreachable:
            rows += [(line, "unchecked", unreachable) for line in requirements]
            continue
        resolved = resolve(toolchain, requirements, index)
        for line in requirements:
            spec, version = line.split("==")
            got = resolved.get(distribution(spec).lower())
            if got == version:
                rows.append((line, "ok", f"a {toolchain.python} wheel from {index}"))
            else:
                rows.append((line, "fail", resolved.get("", f"pip resolved {got!r}")))
    return rows


def ref_exists(repository: str, ref: str, is_tag: bool, local: Path | None) -> str | None:
    """None when `repository` has the tag or commit; else what went wrong."""
    if local is not None:
        target = f"refs/tags/{ref}^{{commit}}" if is_tag else f"{ref}^{{commit}}"
        done = subprocess.run(["git", "--git-dir", str(local), "rev-parse", "--verify", "--quiet", target],
                              capture_output=True, text=True, check=False)
        return None if done.returncode == 0 else f"{local} has no {'tag' if is_tag else 'commit'} {ref}"
    if is_tag:
        done = subprocess.run(["git", "ls-remote", "--exit-code", "--tags", repository, f"refs/tags/{ref}"],
                              capture_output=True, text=True, timeout=120, check=False)
        return None if done.returncode == 0 else f"tag {ref} not found ({done.stderr.strip() or 'not listed'})"
    with tempfile.TemporaryDirectory(prefix="kb-ref-") as scratch:
        subprocess.run(["git", "init", "-q", scratch], check=True)
        done = subprocess.run(["git", "-C", scratch, "fetch", "-q", "--depth", "1", repository, ref],
                              capture_output=True, text=True, timeout=300, check=False)
    return None if done.returncode == 0 else f"commit {ref} not found ({done.stderr.strip()})"


def check_sources(toolchain: Toolchain, local: dict[str, Path]) -> list[tuple[str, str, str]]:
    rows = []
    for item in [*toolchain.headers, *toolchain.sources]:
        ref = item.get("tag") or item["commit"]
        problem = ref_exists(item["repository"], ref, bool(item.get("tag")), local.get(item["name"]))
        where = f" (in {local[item['name']]})" if item["name"] in local else ""
        # git's word for a host it cannot reach: that says nothing of the ref, so it is not a failure.
        state = "ok" if not problem else "unchecked" if "unable to access" in problem else "fail"
        rows.append((f"{item['name']}@{ref}", state, problem or f"{item['repository']}{where}"))
    return rows


def _print(rows: list[tuple[str, str, str]], family: str) -> bool:
    for subject, state, detail in rows:
        typer.echo(f"{family:<6} {state:<9} {subject}: {detail}")
    return any(state == "fail" for _, state, _ in rows)


Family = Annotated[list[str] | None, typer.Option("--family", help="nvidia or amd (default: both)")]


@toolchain_app.command("render")
def render(check: Annotated[bool, typer.Option("--check", help="only say which files differ")] = False) -> None:
    """Write the manifests into deploy/ (Modal, Dockerfiles, GitHub workflows, update-image.sh)."""
    stale = toolchain_render.render(write=not check)
    for name in stale:
        typer.echo(f"{'differs from its manifest' if check else 'rendered'}: {name}")
    if check and stale:
        typer.echo("run `kernelbot toolchain render` and commit the result", err=True)
        raise typer.Exit(1)


@toolchain_app.command("pins")
def pins(family: Family = None) -> None:
    """Resolve every Python pin for its image's platform and Python version, without installing."""
    failed = False
    for name in family or FAMILIES:
        failed |= _print(check_pins(load(name)), name)
    if failed:
        raise typer.Exit(1)


@toolchain_app.command("sources")
def sources(family: Family = None,
            local: Annotated[list[str] | None, typer.Option(help="NAME=GITDIR: look in a local clone instead")] = None,
            ) -> None:
    """Check that every header and source repository has its pinned tag or commit."""
    clones = {}
    for item in local or []:
        name, _, path = item.partition("=")
        clones[name] = Path(path)
    failed = False
    for name in family or FAMILIES:
        failed |= _print(check_sources(load(name), clones), name)
    if failed:
        raise typer.Exit(1)
