"""The exploit suite (tests/exploits) and the sandbox tests (tests/sandbox), unchanged, run a second time with every
harness process forked from a warm runner (runner/warm.py), as the local backend runs them."""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from problems import PROBLEMS_ROOT
from runner.confinement.sandbox import SandboxPolicy
from runner.stages import execute as execute_module
from runner.task.payload import build_payload
from runner.task.taskfile import load_problem
from tests.exploits import test_exploits as exploits
from tests.exploits.test_exploits import test_exploit_never_reaches_the_board  # noqa: F401 - run here again
from tests.sandbox import test_sandbox as sandbox
from tests.sandbox.test_sandbox import (  # noqa: F401 - run here again
    test_address_space_limit_refuses_a_large_allocation,
    test_cpu_time_limit_ends_a_spinning_submission_long_before_its_timeout,
    test_environment_is_scrubbed_of_every_secret,
    test_every_run_gets_a_fresh_directory_its_own_uid_and_leaves_nothing_behind,
    test_file_size_limit_refuses_a_huge_file,
    test_no_network_reaches_the_hosts_nats_or_any_local_listener,
    test_process_limit_stops_a_fork_bomb,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def warm(warm_launcher):
    return warm_launcher


@pytest.fixture(autouse=True)
def forked_sandbox_runs(warm, monkeypatch):
    """The sandbox tests call runner.stages.execute through their module's name: give it the warm runner."""
    monkeypatch.setattr(sandbox, "execute", functools.partial(execute_module.execute, warm=warm))


@pytest.fixture(scope="module")
def runs(warm):
    """The exploit suite's runs (tests/exploits: public and secret run of each exploit), forked from `warm`."""
    tasks = {e.problem: load_problem(PROBLEMS_ROOT / "examples" / e.problem).task for e in exploits.EXPLOITS}

    def run(item):
        exploit, label = item
        mode, seed = exploits.MODES[label]
        code = (exploits.SUBMISSIONS / exploit.file).read_text()
        payload = build_payload(tasks[exploit.problem], code, run_id=f"{exploit.file}-{label}", gpu="cpu",
                                mode=mode, secret=seed is not None, seed=seed)
        return (exploit.file, label), execute_module.execute(payload, sandbox=SandboxPolicy(), warm=warm)

    plan = sorted(((exploit, label) for exploit in exploits.EXPLOITS for label in exploits.MODES),
                  key=lambda item: (item[0].stopped_by in ("test", "benchmark"), item[0].file))
    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        return dict(pool.map(run, plan))
