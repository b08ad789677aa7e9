"""Problem sync end to end: `kernelbot problems sync` as a subprocess against the running platform (ledger and
gateway as subprocesses, real NATS and Postgres), `POST /admin/update-problems` downloading a branch archive from a
local HTTP server, and the dev-leaderboard and delete routes (docs/http-api.md "Admin routes")."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import subprocess
import sys
import tarfile
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from schemas.events import SubmissionReceived
from services.cli import main as cli
from services.kit.bus import publish_all
from tests.support.events import archived
from tests.support.in_process import InProcessPlatform
from tests.support.platform import ADMIN_TOKEN, Platform

FIXTURE = Path(__file__).parents[1] / "fixtures" / "reference_kernels"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FIXTURE_NAMES = {"vectoradd_v2", "grayscale_v2", "matmul_cu_v2", "trimul"}


class SyncPlatform(InProcessPlatform):
    """Ledger and gateway only (sync needs nothing else), with the problem settings of the gateway."""

    def __init__(self, *args, extra_env: dict[str, str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.extra_env = extra_env

    def env(self) -> dict[str, str]:
        return {**super().env(), **self.extra_env}

    def boards(self) -> dict[str, dict]:
        return {board["name"]: board for board in self.http.get("/leaderboards").json()}


def sync(platform: Platform, checkout: Path, *args: str, token: str | None = ADMIN_TOKEN):
    """`kernelbot problems sync` as its own process, exactly as an organiser runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    if token is not None:
        env["KB_ADMIN_TOKEN"] = token
    done = subprocess.run([sys.executable, "-m", "services.cli", "problems", "sync", str(checkout), "--url",
                           platform.url, *args], env=env, capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, done.stdout.splitlines(), done.stderr


def sync_here(platform: Platform, checkout: Path, *args: str, token: str | None = ADMIN_TOKEN):
    """The same command run in this process (saves a Python start-up per call; the HTTP path is the same)."""
    env = {"KB_ADMIN_TOKEN": token or "", "KB_URL": platform.url}
    done = CliRunner().invoke(cli.app, ["problems", "sync", str(checkout), *args], env=env)
    return done.exit_code, done.stdout.splitlines(), done.stderr


def edit_task(checkout: Path, directory: str, **changes) -> None:
    path = checkout / "problems" / directory / "task.yml"
    task = yaml.safe_load(path.read_text())
    task.update(changes)
    path.write_text(yaml.safe_dump(task, sort_keys=False))


@pytest.fixture
def checkout(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "reference-kernels"))


@pytest.fixture
def archive_server(checkout):
    """A faithful stand-in for GitHub's archive download: `/<owner>/<repo>/<branch>.tar.gz`, 404 otherwise."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(checkout, arcname="reference-kernels-main")
    body = buffer.getvalue()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            found = self.path == "/gpu-mode/reference-kernels/main.tar.gz"
            self.send_response(200 if found else 404)
            self.send_header("Content-Length", str(len(body) if found else 0))
            self.end_headers()
            if found:
                self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def platform(nats_url, database_url, tmp_path, checkout, archive_server):
    running = SyncPlatform(nats_url, database_url, tmp_path, extra_env={
        "KB_DEV_PROBLEMS_DIR": str(checkout / "problems"),
        "KB_PROBLEMS_ARCHIVE_URL": archive_server + "/{repository}/{branch}.tar.gz",
        # no dispatcher runs here, so a submission never ends: a read right after it would be held as popcorn-cli's
        # first poll (docs/polling.md) for the whole long poll
        "KB_LONG_POLL_S": "0",
    })
    running.start("ledger", "gateway")
    yield running
    running.stop()


def test_problems_sync_creates_then_skips_then_updates_and_reports_a_broken_task(platform, checkout):
    code, lines, err = sync(platform, checkout)
    assert code == 0, err
    harness = {line.split(":")[0].removeprefix("harness  "): line for line in lines if line.startswith("harness  ")}
    assert sorted(line for line in lines[:-1] if not line.startswith("harness")) == \
        sorted(f"created  {name}" for name in FIXTURE_NAMES)
    assert lines[-1] == "4 created, 0 updated, 0 skipped, 0 errors"
    # Each board says whether our harness judges it: the stock eval.py is replaced, a problem's own rewrite of it
    # and a foreign CUDA harness are not (and say why).
    assert set(harness) == FIXTURE_NAMES
    assert harness["vectoradd_v2"].startswith("harness  vectoradd_v2: protected: KernelBot's supervisor/worker "
                                              "harness in place of the stock eval.py")
    assert harness["grayscale_v2"].startswith("harness  grayscale_v2: UNPROTECTED: KernelBot's harness cannot take "
                                              "its place: its eval.py (sha256 ")
    assert harness["matmul_cu_v2"].startswith("harness  matmul_cu_v2: UNPROTECTED: the problem's own harness")
    boards = platform.boards()
    assert boards["vectoradd_v2"]["harness"]["protected"] is True
    assert boards["grayscale_v2"]["harness"] == {"protected": False, "reason": harness["grayscale_v2"].split(
        "UNPROTECTED: ", 1)[1]}
    assert FIXTURE_NAMES <= set(boards)
    assert boards["vectoradd_v2"]["description"].startswith("Implement a float16 vector addition kernel.")
    assert platform.http.get("/gpus/vectoradd_v2").json() == ["A100", "B200", "H100", "L4"]
    assert platform.http.get("/gpus/matmul_cu_v2").json() == ["A100", "H100"]
    assert len(archived(platform.database_url, "LeaderboardCreated")) == 4

    code, lines, _ = sync_here(platform, checkout)
    assert code == 0 and sorted(line for line in lines[:-1] if not line.startswith("harness")) == \
        sorted(f"skipped  {name}: no changes" for name in FIXTURE_NAMES)
    assert sum(line.startswith("harness  ") for line in lines) == len(FIXTURE_NAMES)  # unchanged boards say it too

    edit_task(checkout, "pmpp_v2/vectoradd_py", description="Add two vectors, faster.")
    code, lines, _ = sync_here(platform, checkout, "--problem-set", "pmpp_v2")
    assert code == 0 and "updated  vectoradd_v2" in lines and lines[-1] == "0 created, 1 updated, 2 skipped, 0 errors"
    assert platform.boards()["vectoradd_v2"]["description"] == "Add two vectors, faster."
    [update] = archived(platform.database_url, "LeaderboardUpdated")
    assert update["name"] == "vectoradd_v2"

    edit_task(checkout, "pmpp_v2/vectoradd_py", ranking_by="geom")
    code, lines, _ = sync_here(platform, checkout, "--problem-set", "pmpp_v2")
    assert code == 0 and "skipped  vectoradd_v2: significant task changes require --force" in lines
    code, lines, _ = sync_here(platform, checkout, "--problem-set", "pmpp_v2", "--force")
    assert code == 0 and "updated  vectoradd_v2" in lines
    assert platform.boards()["vectoradd_v2"]["task"]["ranking_by"] == "geom"

    edit_task(checkout, "pmpp_v2/grayscale_py", test_timeout="soon")
    code, lines, _ = sync(platform, checkout)
    assert code == 1
    assert ("error    grayscale_v2: Failed to parse task.yml: problems/pmpp_v2/grayscale_py/task.yml: test_timeout: "
            "must be an integer, got str 'soon'") in lines
    assert "skipped  trimul: no changes" in lines  # the broken one does not stop the others

    code, _, err = sync_here(platform, checkout, token=None)
    assert code == 2 and "KB_ADMIN_TOKEN" in err
    code, _, err = sync_here(platform, checkout, token="wrong")
    assert code == 1 and "401: Invalid admin token" in err
    code, _, err = sync_here(platform, checkout, "--problem-set", "amd")
    assert code == 1 and "400: Problem set not found. Available: ['bioml', 'pmpp_v2']" in err


def test_update_problems_and_dev_leaderboards_and_deleting_them(platform, checkout):
    def update(**body):
        return platform.http.post("/admin/update-problems", json={"repository": "gpu-mode/reference-kernels",
                                                                   "branch": "main", "force": False, **body},
                                  headers=ADMIN)

    response = update(problem_set="bioml", visibility="closed")
    assert response.status_code == 200, response.text
    harness = {"protected": True, "reason": "KernelBot's supervisor/worker harness in place of the stock eval.py "
                                            "(pmpp_v2 eval.py (KernelBot test rewrite))"}
    assert response.json() == {"status": "ok", "created": ["trimul"], "updated": [], "skipped": [], "errors": [],
                               "harness": {"trimul": harness}}
    assert platform.boards()["trimul"]["task"] == {}  # created closed: its task is not shown to anyone
    assert update(problem_set="bioml").json()["skipped"] == [{"name": "trimul", "reason": "no changes"}]
    assert set(update().json()["created"]) == FIXTURE_NAMES - {"trimul"}

    missing = update(branch="gone")
    assert missing.status_code == 200
    [error] = missing.json()["errors"]
    assert error["name"] == "download" and "HTTP 404" in error["error"]
    for body, detail in [({"branch": "feature/x"}, "Branch names with slashes are not supported"),
                         ({"visibility": "secret"}, "visibility must be 'public' or 'closed'"),
                         ({"problem_set": "amd"}, "Problem set not found. Available: ['bioml', 'pmpp_v2']")]:
        refused = update(**body)
        assert (refused.status_code, refused.json()) == (400, {"detail": detail})
    assert platform.http.post("/admin/update-problems", json={}).status_code == 401

    # POST /admin/leaderboards: `<directory>-dev` boards from the development problems (here: the same checkout)
    def create(body):
        return platform.http.post("/admin/leaderboards", json=body, headers=ADMIN)

    broken = checkout / "problems" / "pmpp_v2" / "broken_py"
    broken.mkdir()
    (broken / "task.yml").write_text("lang: py\n")
    for body, detail in [({}, "Missing required field: directory"),
                         ({"directory": "../pmpp_v2"}, "Invalid problem directory"),
                         ({"directory": "nothing_here"}, "Invalid problem directory"),
                         ({"directory": "matmul_cu", "visibility": "secret"}, "visibility must be 'public' or 'closed'"),
                         ({"directory": "vectoradd_py"},
                          "No gpus specified in task.yml. Add 'gpus:' field with list of GPU types."),
                         ({"directory": "broken_py"}, ("Invalid task definition: problems/pmpp_v2/broken_py/task.yml: "
                                                       "files: required field is missing"))]:
        response = create(body)
        assert (response.status_code, response.json()) == (400, {"detail": detail})

    assert create({"directory": "matmul_cu"}).json() == {"status": "ok", "leaderboard": "matmul_cu-dev"}
    assert platform.http.get("/gpus/matmul_cu-dev").json() == ["A100", "H100"]
    cli_id = platform.register("u1", "alice")

    def submit(submission_id: int) -> None:
        event = SubmissionReceived(submission_id=submission_id, leaderboard="matmul_cu-dev", gpus=["H100"],
                                   mode="test", user_id="u1", user_name="alice", file_name="submission.cu",
                                   code="int x;")
        asyncio.run(publish_all(platform.nats_url, [event]))
        platform.wait_for(lambda: visible(submission_id), "the submission")

    def visible(submission_id: int) -> bool:
        return platform.http.get(f"/user/submissions/{submission_id}",
                                 headers={"X-Popcorn-Cli-Id": cli_id}).status_code == 200

    submit(9001)
    # replacing the dev board takes its submissions with it
    assert create({"directory": "matmul_cu", "visibility": "closed"}).status_code == 200
    assert not visible(9001)
    assert platform.boards()["matmul_cu-dev"]["visibility"] == "closed"
    # a dev board lives a year, from both front ends (services.core.admin.dev_boards; the bot's test checks its side)
    deadline = datetime.fromisoformat(platform.boards()["matmul_cu-dev"]["deadline"])
    assert timedelta(days=364) < deadline - datetime.now(UTC) <= timedelta(days=365)

    # DELETE /admin/leaderboards: refused while submissions exist, unless forced
    submit(9002)
    refused = platform.http.delete("/admin/leaderboards/MATMUL_CU-dev", headers=ADMIN)
    assert (refused.status_code, refused.json()) == (
        400, {"detail": "Could not delete leaderboard `matmul_cu-dev` with existing submissions."})
    deleted = platform.http.delete("/admin/leaderboards/matmul_cu-dev?force=true", headers=ADMIN)
    assert deleted.json() == {"status": "ok", "leaderboard": "matmul_cu-dev", "force": True}
    assert "matmul_cu-dev" not in platform.boards() and not visible(9002)
    assert {e["submission_id"] for e in archived(platform.database_url, "SubmissionDeleted")} == {9001, 9002}
    unforced = platform.http.delete("/admin/leaderboards/trimul", headers=ADMIN)
    assert unforced.json() == {"status": "ok", "leaderboard": "trimul", "force": False}
    gone = platform.http.delete("/admin/leaderboards/trimul", headers=ADMIN)
    assert (gone.status_code, gone.json()) == (404, {"detail": "Leaderboard `trimul` does not exist."})
    assert [e["force"] for e in archived(platform.database_url, "LeaderboardDeleted")] == [True, True, False]


FAMILIES = Path(__file__).parents[1] / "fixtures" / "problem_families"


def test_problems_sync_takes_every_family_and_boolean_cases(platform, tmp_path):
    """One problem per family of today's sets; the distributed one's cases carry YAML booleans (`has_bias: True`)."""
    checkout = Path(shutil.copytree(FAMILIES, tmp_path / "families"))
    code, lines, err = sync(platform, checkout)
    assert code == 0, (lines, err)
    assert lines[-1] == "5 created, 0 updated, 0 skipped, 0 errors"
    tests = platform.boards()["amd-reduce-scatter"]["task"]["tests"]
    assert [case["has_bias"] for case in tests] == ["True", "False"]  # the words upstream's case lines carry


@pytest.mark.skipif(not os.environ.get("KB_TEST_REFERENCE_KERNELS"),
                    reason="set KB_TEST_REFERENCE_KERNELS to a reference-kernels checkout to sync it whole")
def test_problems_sync_of_a_whole_reference_kernels_checkout(platform):
    code, lines, err = sync(platform, Path(os.environ["KB_TEST_REFERENCE_KERNELS"]))
    print("\n".join(lines))
    assert code == 0 and lines[-1].endswith(" 0 errors"), (lines, err)
