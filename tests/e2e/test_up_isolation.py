"""`kernelbot up` says in one line at start when its local runner cannot isolate runs, and `--dev` (or
KB_DEVELOPMENT_MODE) hands development mode to the services it starts.

The command runs where the sandbox cannot be built (not root, and no new user namespaces), so the real sandbox
check answers `limits-only`; NATS and Postgres are named but unreachable, so it stops right after the line under test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.confinement.sandbox import sandbox_level
from services.cli.up import Stack
from tests.support.hosts import CANNOT_ISOLATE, can_simulate_a_host_without_isolation


def _first_line(tmp_path: Path, *flags: str, prefix: tuple[str, ...] = (), **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KB_") and k != "DATABASE_URL"}
    clean.update(KB_NATS_URL="nats://127.0.0.1:1", KB_DATABASE_URL="postgresql://postgres@127.0.0.1:1/none", **env)
    done = subprocess.run([*prefix, sys.executable, "-m", "services.cli", "up", "--data-dir", str(tmp_path / "data"),
                           *flags], env=clean, capture_output=True, text=True, timeout=120, check=False)
    return done.stdout.splitlines()[0]


unprivileged = pytest.mark.skipif(not can_simulate_a_host_without_isolation(), reason="needs `unshare --user` and seccomp")


@unprivileged
def test_a_runner_that_cannot_isolate_is_announced_with_its_reason(tmp_path):
    line = _first_line(tmp_path, prefix=tuple(CANNOT_ISOLATE))
    assert line.startswith("Runs are confined by resource limits only: bwrap: ") and "namespace" in line
    assert line.endswith("; they will not be ranked unless --dev")


@unprivileged
@pytest.mark.parametrize(("flags", "env"), [(("--dev",), {}), ((), {"KB_DEVELOPMENT_MODE": "true"})])
def test_in_development_mode_the_line_says_they_are_ranked(tmp_path, flags, env):
    line = _first_line(tmp_path, *flags, prefix=tuple(CANNOT_ISOLATE), **env)
    assert line.startswith("Runs are confined by resource limits only: bwrap: ")
    assert line.endswith("; development mode (--dev): they are ranked, and their reports say so")


def test_a_runner_that_isolates_says_nothing_about_it(tmp_path):
    if sandbox_level()[0] != "full":
        pytest.skip("this machine cannot isolate runs")
    assert _first_line(tmp_path).startswith("Starting NATS and Postgres")


def test_development_mode_reaches_the_services_only_when_asked_for(tmp_path, monkeypatch):
    monkeypatch.delenv("KB_DEVELOPMENT_MODE", raising=False)
    assert "KB_DEVELOPMENT_MODE" not in Stack(data_dir=tmp_path, port=8000).service_env()
    assert Stack(data_dir=tmp_path, port=8000, development=True).service_env()["KB_DEVELOPMENT_MODE"] == "true"
