"""The real platform for end-to-end tests: every service a subprocess, as `kernelbot up` runs them."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from problems import PROBLEMS_ROOT
from runner.confinement.sandbox import sandbox_level
from runner.task.taskfile import load_problem
from schemas.events import LeaderboardCreated
from services.cli.bundled import leaderboards_from_competition, parse_deadline
from services.kit.bus import publish_all
from services.kit.embedded import free_port
from services.kit.upstream_env import UPSTREAM_NAMES
from tests.support.children import spawn

ADMIN_TOKEN = "test-admin-token"
SERVICES = ("ledger", "dispatcher", "scorer", "gateway")


UPSTREAM = set(UPSTREAM_NAMES)


# A board's secret seed in tests: a value nothing else prints, so a test can search every answer for it.
SECRET_SEED = 1_618_033_988


def identity_board(name: str, gpus: list[str], visibility: str = "public") -> LeaderboardCreated:
    """A leaderboard carrying the identity_py task, for boards on made-up GPUs (`null` is served at once)."""
    problem = load_problem(PROBLEMS_ROOT / "examples" / "identity_py")
    return LeaderboardCreated(name=name, task=problem.task, task_hash=problem.task_hash, gpus=gpus,
                              deadline=parse_deadline("2100-01-01"), secret_seed=SECRET_SEED, visibility=visibility)


class Platform:
    def __init__(self, nats_url: str, database_url: str, workdir: Path, *, local_gpus: dict | None = None,
                 null_gpus: tuple[str, ...] = (), admin_token: str = ADMIN_TOKEN,
                 extra_env: dict[str, str] | None = None) -> None:
        self.nats_url = nats_url
        self.database_url = database_url
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.local_gpus = local_gpus or {"cpu": 2}
        self.null_gpus = null_gpus
        self.admin_token = admin_token
        self.extra_env = extra_env or {}
        self.children: dict[str, subprocess.Popen] = {}
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def env(self) -> dict[str, str]:
        # hermetic: neither our names nor upstream KernelBot's aliases of them come from the machine's environment
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("KB_") and k.upper() not in UPSTREAM}
        env.update(
            KB_NATS_URL=self.nats_url, KB_DATABASE_URL=self.database_url, KB_PORT=str(self.port),
            KB_ADMIN_TOKEN=self.admin_token, KB_RUNS_DIR=str(self.workdir / "runs"), KB_WORKER_ID="test-dispatcher",
            KB_LOCAL_GPUS=json.dumps(self.local_gpus), KB_NULL_GPUS=json.dumps(list(self.null_gpus)),
            PYTHONUNBUFFERED="1",
            # a test makes in seconds what a person makes in an hour; tests/security/test_limits.py sets its own
            KB_AUTH_INIT_RATE="1000/minute", KB_SUBMIT_RATE="1000/minute",
        )
        if sandbox_level()[0] != "full":
            # A machine that cannot isolate runs (not root): the tests that expect a ranking rank them as a
            # developer's `kernelbot up --dev` would. tests/security/test_fail_closed.py turns it off again.
            env["KB_DEVELOPMENT_MODE"] = "true"
        env.update(self.extra_env)
        return env

    def start(self, *names: str) -> None:
        for name in names or SERVICES:
            self.spawn(name, [sys.executable, "-m", "services.cli", "serve", name])
        if "gateway" in (names or SERVICES):
            self.wait_healthy()

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start `argv` as the child `name`, logging to `name`.log; it dies with the test, whichever thread starts
        it (tests/support/children.py). A child of that name still alive is refused: it would run on unwatched."""
        running = self.children.get(name)
        if running is not None and running.poll() is None:
            raise RuntimeError(f"{name} is still running (pid {running.pid}); stop it before starting another")
        with open(self.workdir / f"{name}.log", "ab") as log:  # the child holds its own copy of the descriptor
            child = spawn(argv, env=self.env() if env is None else env, stdout=log, stderr=subprocess.STDOUT)
        self.children[name] = child
        return child

    def wait_healthy(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.http.get("/ready").status_code == 200:  # /health answers even without NATS or Postgres
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"gateway did not become ready; log:\n{self.log('gateway')}")

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-5000:] if path.exists() else ""

    def kill(self, name: str) -> None:
        child = self.children.pop(name)
        child.send_signal(signal.SIGKILL)
        child.wait()

    def stop(self) -> None:
        self.stop_children()
        self.http.close()

    def stop_children(self) -> None:
        """SIGTERM to every child, SIGKILL to one still alive after 10 s; each is reaped before this returns."""
        for child in self.children.values():
            child.send_signal(signal.SIGTERM)
        for child in self.children.values():
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        self.children.clear()

    # --- what a user does ---------------------------------------------------------------------------------

    def load_bundled_problems(self) -> None:
        events = leaderboards_from_competition(PROBLEMS_ROOT / "examples.yaml", set())
        asyncio.run(publish_all(self.nats_url, events))
        self.wait_for(lambda: len(self.http.get("/leaderboards").json()) >= len(events), "leaderboards")

    def add_boards(self, *boards: LeaderboardCreated) -> None:
        asyncio.run(publish_all(self.nats_url, boards))
        names = {b.name for b in boards}
        self.wait_for(lambda: names <= {b["name"] for b in self.http.get("/leaderboards").json()}, "boards")

    def register(self, user_id: str, user_name: str) -> str:
        response = self.http.post("/admin/users", json={"user_id": user_id, "user_name": user_name},
                                  headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        response.raise_for_status()
        cli_id = response.json()["cli_id"]
        self.wait_for(lambda: self.http.get("/user/submissions/0", headers={"X-Popcorn-Cli-Id": cli_id})
                      .status_code == 404, "user registration")
        return cli_id

    def submit(self, cli_id: str, leaderboard: str, gpu: str, mode: str, code: str,
               file_name: str = "submission.py") -> httpx.Response:
        return self.http.post(f"/submission/{leaderboard}/{gpu}/{mode}", headers={"X-Popcorn-Cli-Id": cli_id},
                              files={"file": (file_name, code.encode())})

    def submission(self, cli_id: str, submission_id: int) -> dict:
        response = self.http.get(f"/user/submissions/{submission_id}", headers={"X-Popcorn-Cli-Id": cli_id})
        response.raise_for_status()
        return response.json()

    def wait_done(self, cli_id: str, submission_id: int, timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            view = self.submission(cli_id, submission_id)
            if view["done"]:
                return view
            time.sleep(0.2)
        raise AssertionError(f"submission {submission_id} not done in {timeout}s: {view}\n"
                             f"dispatcher:\n{self.log('dispatcher')}\nscorer:\n{self.log('scorer')}")

    def ranking(self, leaderboard: str, gpu: str) -> list[dict]:
        response = self.http.get(f"/submissions/{leaderboard}/{gpu}")
        response.raise_for_status()
        return response.json()

    @staticmethod
    def wait_for(condition, what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")
