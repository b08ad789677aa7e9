"""The `kernelbot` command as a user runs it: up, submit, leaderboard show, Ctrl-C, up again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest
import yaml

from problems import PROBLEMS_ROOT
from runner.confinement.sandbox import sandbox_level
from services.kit.embedded import free_port
from tests.support.platform import Platform

KERNELBOT = [sys.executable, "-m", "services.cli"]
IDENTITY = PROBLEMS_ROOT / "examples" / "identity_py"


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update(extra)
    return env


def _wait_healthy(url: str, up: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert up.poll() is None, up.stdout.read()
        try:
            if httpx.get(f"{url}/health").status_code == 200 and httpx.get(f"{url}/leaderboards").json():
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("kernelbot up did not come up")


@pytest.mark.slow
def test_up_submit_show_stop_and_up_again(tmp_path):
    """The README's first command and a second terminal, with no NATS or Postgres given: all embedded."""
    data_dir, port = tmp_path / "data", free_port()
    url = f"http://127.0.0.1:{port}"
    env = _clean_env(KB_DATA_DIR=str(data_dir), KB_URL=url)
    # where runs cannot be isolated (not root) only development mode ranks them
    dev = ["--dev"] if sandbox_level()[0] != "full" else []
    command = [*KERNELBOT, "up", "--data-dir", str(data_dir), "--port", str(port), *dev]
    up = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_healthy(url, up)
        submitted = subprocess.run(
            [*KERNELBOT, "submit", str(IDENTITY / "submission.py"), "--leaderboard", "identity_py", "--gpu", "cpu",
             "--mode", "leaderboard"], env=env, capture_output=True, text=True, timeout=240,
        )
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        assert "succeeded" in submitted.stdout
        shown = subprocess.run([*KERNELBOT, "leaderboard", "show", "identity_py", "--gpu", "cpu"], env=env,
                               capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert "harness: protected: KernelBot's supervisor/worker harness" in shown.stdout, shown.stdout
        [row] = [line.split() for line in shown.stdout.splitlines() if line.strip().startswith("1 ")]
        assert row[0] == "1" and float(row[2]) > 0
    finally:
        up.send_signal(signal.SIGINT)
        output, _ = up.communicate(timeout=60)
    assert "Stopping" in output
    assert up.returncode == 0, output

    again = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_healthy(url, again)
        ranking = httpx.get(f"{url}/submissions/identity_py/cpu").json()
        assert [r["rank"] for r in ranking] == [1]  # the data outlived the restart
        bundled = yaml.safe_load((PROBLEMS_ROOT / "examples.yaml").read_text())["problems"]
        assert len(httpx.get(f"{url}/leaderboards").json()) == len(bundled)  # and none was loaded twice
    finally:
        again.send_signal(signal.SIGINT)
        again.communicate(timeout=60)


def test_submit_reports_a_failed_submission_with_its_reason(platform):
    platform.load_bundled_problems()
    cli_id = platform.register("5001", "erin")
    wrong = PROBLEMS_ROOT / "examples" / "vectoradd_py" / "solutions" / "wrong" / "subtract.py"
    result = subprocess.run(
        [*KERNELBOT, "submit", str(wrong), "-l", "vectoradd_py", "-m", "test", "--url", platform.url],
        env=_clean_env(KB_CLI_ID=cli_id), capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1
    assert "failed: test failed on cpu:" in result.stdout
    unknown = subprocess.run([*KERNELBOT, "leaderboard", "show", "nope", "--url", platform.url],
                             env=_clean_env(), capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 1
    assert "404: Leaderboard `nope` does not exist." in unknown.stderr


def test_admin_routes_are_disabled_without_a_token(nats_url, database_url, tmp_path):
    running = Platform(nats_url, database_url, tmp_path, admin_token="")
    running.start("gateway")
    try:
        response = running.http.post("/admin/users", json={"user_id": "1", "user_name": "x"},
                                     headers={"Authorization": "Bearer guess"})
        assert response.status_code == 401
        assert response.json() == {"detail": "Admin API is disabled: no admin token is configured"}
    finally:
        running.stop()
