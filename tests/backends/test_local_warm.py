"""The local backend with its warm runner: the runner's harness processes are forked from it, the backend notices
a run's end when it happens (not at a poll), and the warm runner goes when the backend closes."""

from __future__ import annotations

import asyncio
import time

import pytest

from problems import PROBLEMS_ROOT
from runner.task.payload import build_payload
from runner.task.taskfile import load_problem
from schemas.contracts import FullResult
from services.dispatcher.backends.base import PENDING
from services.dispatcher.backends.local import LocalBackend
from tests.support.warm import wait_ready

pytestmark = pytest.mark.slow

PROBLEM = PROBLEMS_ROOT / "examples" / "identity_py"


def test_runs_fork_from_the_backends_warm_runner_and_their_end_is_seen_at_once(tmp_path):
    async def scenario():
        backend = LocalBackend(tmp_path / "runs", warm=True)
        server = backend._warm
        try:
            wait_ready(backend.warm_socket(), server)
            assert backend._warm is server  # a live warm runner is kept, not restarted per launch
            problem = load_problem(PROBLEM)
            slow = "import time\n\ndef custom_kernel(data):\n    time.sleep(2)\n    return data.clone()\n"
            payload = build_payload(problem.task, slow, run_id="warm-local", gpu="cpu", mode="test", secret=False,
                                    seed=None)  # 4 cases, 8 s: still running when the restarted backend looks
            job = await backend.launch(payload, "warm-local.1")
            assert await backend.poll(job) is PENDING
            # The runner itself was forked from the warm runner, and a restarted dispatcher finds it again.
            assert str(job) in backend._forked
            restarted = LocalBackend(tmp_path / "runs", warm=False)
            for _ in range(100):
                if (tmp_path / "runs" / "warm-local.1" / "runner.pid").exists():
                    break
                await asyncio.sleep(0.05)
            assert await restarted.launch(payload, "warm-local.1") == job  # watched, not started twice
            assert await restarted.poll(job) is PENDING
            waited = time.monotonic()
            await backend.wait(job, 120)
            waited = time.monotonic() - waited
            outcome = await backend.poll(job)  # the wait ended because the runner did
            assert isinstance(outcome, FullResult) and outcome.success, outcome
            stage = outcome.runs["test"]
            assert stage.run.passed and stage.timing["start"] == "warm", stage
            assert waited < 100
        finally:
            await backend.close()
        return server

    server = asyncio.run(scenario())
    assert server.wait(60) == 0  # it drained and left
