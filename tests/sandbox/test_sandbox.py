"""The local runner's sandbox (docs/security.md), one hostile submission per limit, through runner.stages.execute.

Each submission is imported and called by a tiny harness (no torch) that reports what happened on the result pipe.
Each test fails when its limit is removed: the submission then succeeds at what it tries. Where a control run
without the limit is cheap, it is made too, proving the submission could do it unconfined.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlparse

import pytest

import runner.confinement.bwrap
from runner.confinement.run_uids import tasks_of_uid
from runner.confinement.sandbox import Limits, RunSandbox, SandboxPolicy, sandbox_level
from runner.stages.execute import execute
from schemas.contracts import RunPayload

HARNESS = """
import os, sys
out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
from submission import custom_kernel
outcome = custom_kernel(None)
out.write("test-count: 1\\ntest.0.status: pass\\noutcome: " + str(outcome).replace("\\n", " ") + "\\ncheck: pass\\n")
"""
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="network namespace and per-run uid need root")
POLICY = SandboxPolicy()


def run(submission: str, policy: SandboxPolicy | None = POLICY, timeout: int = 30):
    payload = RunPayload(run_id="sandbox", gpu="cpu", lang="py", mode="test", main="harness.py",
                         sources={"harness.py": HARNESS, "submission.py": submission},
                         tests=[{"size": 1}], test_timeout=timeout)
    result = execute(payload, sandbox=policy)
    assert result.success, result.error
    return result.runs["test"].run


def outcome(submission: str, policy: SandboxPolicy | None = POLICY) -> str:
    stage = run(submission, policy)
    assert stage.exit_code == 0, (stage.exit_code, stage.stderr)
    return stage.result["outcome"]


def with_limits(**limits) -> SandboxPolicy:
    return replace(POLICY, limits=replace(POLICY.limits, **limits))


ALLOCATE = """
import mmap
def custom_kernel(data):
    try:
        block = mmap.mmap(-1, 3 << 30)  # 3 GiB of address space, never touched
    except (OSError, MemoryError) as exc:
        return "refused " + type(exc).__name__
    return "allocated " + str(len(block))
"""


def test_address_space_limit_refuses_a_large_allocation():
    assert outcome(ALLOCATE, with_limits(address_space=1 << 30)).startswith("refused")
    assert outcome(ALLOCATE, with_limits(address_space=None)).startswith("allocated")


SPIN = """
def custom_kernel(data):
    while True:
        pass
"""


def test_cpu_time_limit_ends_a_spinning_submission_long_before_its_timeout():
    started = time.monotonic()
    stage = run(SPIN, with_limits(cpu_seconds=1), timeout=25)
    assert stage.exit_code == -signal.SIGXCPU, (stage.exit_code, stage.stderr)
    assert not stage.success and time.monotonic() - started < 15


WRITE = """
import os, tempfile
def custom_kernel(data):
    path = os.path.join(tempfile.gettempdir(), "big.bin")
    try:
        with open(path, "wb") as handle:
            for _ in range(8):
                handle.write(b"x" * (1 << 20))
    except OSError as exc:
        return "refused after " + str(os.path.getsize(path)) + " " + exc.strerror
    return "wrote " + str(os.path.getsize(path))
"""


def test_file_size_limit_refuses_a_huge_file():
    assert outcome(WRITE, with_limits(file_size=2 << 20)) == f"refused after {2 << 20} File too large"
    assert outcome(WRITE, with_limits(file_size=None)) == f"wrote {8 << 20}"


FORK = """
import os, time
def custom_kernel(data):
    started = 0
    for _ in range(120):
        try:
            pid = os.fork()
        except OSError as exc:
            return "forked " + str(started) + " then " + type(exc).__name__
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        started += 1
    return "forked " + str(started)
"""


def test_process_limit_stops_a_fork_bomb():
    limited = outcome(FORK, with_limits(processes=40))
    count = int(limited.split()[1])
    assert "BlockingIOError" in limited and 0 < count < 40, limited
    assert outcome(FORK, with_limits(processes=None)) == "forked 120"


def connect_submission(port: int) -> str:
    return f"""
import socket
def custom_kernel(data):
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    except OSError as exc:
        return "refused " + type(exc).__name__
    return "connected"
"""


@needs_root
def test_no_network_reaches_the_hosts_nats_or_any_local_listener(nats_url):
    nats_port = urlparse(nats_url).port
    assert outcome(connect_submission(nats_port)).startswith("refused")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        assert outcome(connect_submission(port)).startswith("refused")
        assert outcome(connect_submission(port), replace(POLICY, isolate=False)) == "connected"


READ_ENV = """
import os
def custom_kernel(data):
    leaked = sorted(name for name in os.environ if name.startswith(("KB_", "SANDBOXTEST")))
    leaked += [name for name in ("DATABASE_URL", "GITHUB_TOKEN", "MY_API_KEY", "AWS_SECRET_ACCESS_KEY",
                                 "SERVICE_PASSWORD", "SIGNING_KEY") if name in os.environ]
    for path in ("/proc/self/environ", "/proc/%d/environ" % os.getppid()):
        try:
            if b"hunter2" in open(path, "rb").read():
                leaked.append(path)
        except OSError:
            pass
    return "leaked " + ",".join(leaked) + " kept " + os.environ.get("HARMLESS_SETTING", "-")
"""


def test_environment_is_scrubbed_of_every_secret(monkeypatch):
    secrets = {"KB_ADMIN_TOKEN": "hunter2", "KB_NATS_URL": "nats://hunter2@127.0.0.1:4222",
               "KB_DATABASE_URL": "postgresql://u:hunter2@db/kb", "DATABASE_URL": "postgresql://u:hunter2@db/x",
               "GITHUB_TOKEN": "hunter2", "MY_API_KEY": "hunter2", "AWS_SECRET_ACCESS_KEY": "hunter2",
               "SERVICE_PASSWORD": "hunter2", "SIGNING_KEY": "hunter2", "SANDBOXTEST_URL": "https://x/hunter2"}
    for name, value in {**secrets, "HARMLESS_SETTING": "yes"}.items():
        monkeypatch.setenv(name, value)
    assert outcome(READ_ENV) == "leaked  kept -"  # an allow-list: what a harness does not need stays out


LEAVE_TRACES = """
import os, subprocess, tempfile
def custom_kernel(data):
    seen = [name for name in ("/tmp/kb-sandbox-trace", os.path.expanduser("~/trace"),
                               os.path.join(tempfile.gettempdir(), "trace")) if os.path.exists(name)]
    writes = []
    for path in ("/tmp/kb-sandbox-trace", os.path.expanduser("~/trace"),
                 os.path.join(tempfile.gettempdir(), "trace"), "trace-in-run-dir"):
        try:
            open(path, "w").write("x")
            writes.append("ok")
        except OSError:
            writes.append("denied")
    daemon = subprocess.Popen(["sleep", "1000"], start_new_session=True)  # leaves the process group
    return "uid %d seen %s writes %s daemon %d" % (os.getuid(), seen, ",".join(writes), daemon.pid)
"""


@needs_root
def test_every_run_gets_a_fresh_directory_its_own_uid_and_leaves_nothing_behind():
    first = outcome(LEAVE_TRACES).split()
    second = outcome(LEAVE_TRACES).split()
    for words in (first, second):
        uid = int(words[1])
        assert uid >= 61_000 and words[3] == "[]", words  # nothing of the other run is visible
        assert words[5] == "ok,ok,ok,denied", words  # the run directory is read-only to user code
        assert tasks_of_uid(uid) == 0  # the daemon (its pid is one of the run's PID namespace) is gone too
    assert not Path("/tmp/kb-sandbox-trace").exists()


def test_unprivileged_fallback_counts_the_users_tasks_into_the_process_limit():
    box_policy = SandboxPolicy(limits=Limits(processes=10), isolate=False)
    with RunSandbox(box_policy) as box:
        argv = box.wrap(["true"], 10)
    spec = json.loads(argv[argv.index("--") - 1])
    assert spec["uid"] is None and not spec["isolate_network"]
    assert spec["limits"]["processes"] > 10  # the user's own tasks are added to the allowance


def test_where_bubblewrap_cannot_run_the_run_falls_back_to_limits_only_and_says_so(monkeypatch):
    monkeypatch.setattr(runner.confinement.bwrap, "bwrap_binary", lambda: None)
    sandbox_level.cache_clear()
    try:
        level, reason = sandbox_level()
        assert level == "limits-only" and "bubblewrap is not installed" in reason
        payload = RunPayload(run_id="fallback", gpu="cpu", lang="py", mode="test", main="harness.py",
                             sources={"harness.py": HARNESS, "submission.py": "def custom_kernel(d):\n    return 1\n"},
                             tests=[{"size": 1}], test_timeout=30)
        assert execute(payload, sandbox=POLICY).isolation == "limits-only"
        with pytest.raises(RuntimeError, match="bubblewrap is not installed"), RunSandbox(SandboxPolicy(isolate=True)):
            pass
    finally:
        monkeypatch.undo()
        sandbox_level.cache_clear()
    assert sandbox_level()[0] == "full" and execute(payload, sandbox=POLICY).isolation == "full"


def test_a_sandbox_that_bwrap_refuses_at_run_time_leaves_the_run_limits_only(monkeypatch):
    build = runner.confinement.bwrap.bwrap_arguments
    monkeypatch.setattr(runner.confinement.bwrap, "bwrap_arguments", lambda *args: ["--no-such-option", *build(*args)])
    payload = RunPayload(run_id="refused", gpu="cpu", lang="py", mode="test", main="harness.py",
                         sources={"harness.py": HARNESS, "submission.py": "def custom_kernel(d):\n    return 1\n"},
                         tests=[{"size": 1}], test_timeout=30)
    result = execute(payload, sandbox=POLICY)
    assert result.isolation == "limits-only" and result.runs["test"].run.passed, result
    refused = execute(payload, sandbox=SandboxPolicy(isolate=True))
    assert not refused.success and "no-such-option" in refused.error


def test_an_interpreter_under_tmp_stays_visible_over_the_sandboxs_own_tmp(monkeypatch, tmp_path):
    """bwrap mounts in the order it is told: the interpreter's environment must come after the fresh /tmp, or a
    virtual environment under /tmp (a CI checkout) is hidden and no process of the run can start."""
    monkeypatch.setattr(runner.confinement.bwrap, "readable_paths", lambda: ["/tmp/checkout/.venv"])
    args = runner.confinement.bwrap.bwrap_arguments(tmp_path / "kernelbot-run-x", None, [], 61000)
    pairs = list(zip(args, args[1:]))
    covered_at = pairs.index(("--tmpfs", "/tmp"))
    bound_at = pairs.index(("--ro-bind", "/tmp/checkout/.venv"))
    assert bound_at > covered_at
