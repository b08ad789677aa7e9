"""Hostile submissions against the run sandbox, through the real runner: `python -m runner` started as a process,
its harness and user code confined the way a host confines them (runner/confinement/sandbox.py,
runner/confinement/bwrap.py).

Each attack runs under every runner identity this host can give: root (the per-run uid), an ordinary user (the
case of `kernelbot up` without root: the test creates `kbuser` and runs the runner as it), and root with the warm
runner (runner/warm.py) forking the processes. The submission is imported by a tiny harness (no torch) that
reports what it achieved; the test then checks the host afterwards as well.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

import runner
from runner.confinement.sandbox import Limits, SandboxPolicy, closed_ancestors, interpreter_paths
from runner.launching.warm_client import start_warm_runner
from runner.stages.execute import execute
from schemas.contracts import FullResult, RunPayload
from tests.sandbox.test_sandbox import connect_submission
from tests.support.hosts import ORDINARY_USER, ordinary_user

REPO = Path(runner.__file__).resolve().parents[1]
CONFINE = REPO / "runner" / "confinement" / "confine.py"
ROOT = os.geteuid() == 0
USER = ORDINARY_USER
HARNESS = """
import os
out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
from submission import custom_kernel
outcome = custom_kernel(None)
out.write("test-count: 1\\ntest.0.status: pass\\noutcome: " + str(outcome).replace("\\n", " ") + "\\ncheck: pass\\n")
"""



class Identity:
    """Who runs the runner: `root`, `user` (kbuser, the runner without root) or `warm` (root, warm runner)."""

    def __init__(self, name: str, tmp: Path) -> None:
        self.name = name
        self.account = ordinary_user() if name == "user" else pwd.getpwuid(os.geteuid())
        self.home = Path(self.account.pw_dir)
        self.place = tmp / name  # the runner's own directory: payload, result, its runs' parent
        self.place.mkdir(mode=0o755)
        self.runs = self.place / "runs"
        self.runs.mkdir()
        for path in (self.place, self.runs):
            os.chown(path, self.account.pw_uid, self.account.pw_gid)
        self.warm_socket: Path | None = None
        self.warm_server = None

    def as_me(self, argv: list[str]) -> list[str]:
        if self.name != "user":
            return argv
        # The interpreter may sit under a closed /root: reveal it, as the runner does for its own uids.
        spec = {"reveal": closed_ancestors(interpreter_paths()), "uid": self.account.pw_uid,
                "gid": self.account.pw_gid}
        return [sys.executable, "-I", "-S", str(CONFINE), json.dumps(spec), "--", *argv]

    def env(self, **extra: str) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO), "HOME": str(self.home),
                "LANG": "C.UTF-8", **extra}

    def start(self, submission: str, tag: str, timeout: int = 30, **env: str) -> subprocess.Popen:
        payload = RunPayload(run_id=tag, gpu="cpu", lang="py", mode="test", main="harness.py",
                             sources={"harness.py": HARNESS, "submission.py": submission},
                             tests=[{"size": 1}], test_timeout=timeout)
        payload_file = self.place / f"{tag}.payload.json"
        payload_file.write_text(payload.model_dump_json())
        os.chown(payload_file, self.account.pw_uid, self.account.pw_gid)
        argv = [sys.executable, "-m", "runner", "--payload", str(payload_file), "--result", str(self.result(tag)),
                "--workdir", str(self.runs)]
        if self.warm_socket is not None:
            argv += ["--warm", str(self.warm_socket)]
        return subprocess.Popen(self.as_me(argv), cwd=self.place, env=self.env(**env), start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def result(self, tag: str) -> Path:
        return self.place / f"{tag}.result.json"

    def run(self, submission: str, tag: str | None = None, **env: str) -> tuple[FullResult, str]:
        tag = tag or uuid.uuid4().hex[:12]
        process = self.start(submission, tag, **env)
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 0, output
        result = FullResult.model_validate_json(self.result(tag).read_text())
        assert result.success, result.error
        stage = result.runs["test"].run
        assert stage is not None and stage.exit_code == 0, (stage, output)
        return result, stage.result["outcome"]


@pytest.fixture(scope="module")
def warm_server(tmp_path_factory):
    if not ROOT:
        yield None
        return
    directory = tmp_path_factory.mktemp("warm")
    path, server = start_warm_runner(directory)
    yield path
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture(params=["root", "user", "warm"] if ROOT else ["self"])
def who(request, warm_server):
    place = Path(tempfile.mkdtemp(prefix="kb-escape-"))  # not under pytest's 0700 directory: kbuser must reach it
    os.chmod(place, 0o755)
    identity = Identity(request.param, place)
    if request.param == "warm":
        identity.warm_socket = warm_server
    yield identity
    shutil.rmtree(place, ignore_errors=True)


def processes_with(token: str) -> list[int]:
    found = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            if token.encode() in Path(cmdline).read_bytes():
                found.append(int(cmdline.split("/")[2]))
        except OSError:
            pass
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.mark.slow
def test_another_processes_environment_stays_out_of_reach(who):
    token = uuid.uuid4().hex
    decoy = subprocess.Popen(["sleep", "300"], env={"KB_DATABASE_URL": f"postgresql://kb:{token}@db/kb"},
                             user=who.account.pw_uid, group=who.account.pw_gid, extra_groups=[])
    try:
        _, outcome = who.run(f"""
import glob
def custom_kernel(data):
    found = []
    for path in ["/proc/{decoy.pid}/environ", *glob.glob("/proc/[0-9]*/environ")]:
        try:
            if b"{token}" in open(path, "rb").read():
                found.append(path)
        except OSError:
            pass
    return "found " + ",".join(found) if found else "clean"
""")
    finally:
        decoy.kill()
        decoy.wait()
    assert outcome == "clean"


def test_no_file_outside_the_run_can_be_written(who):
    token = uuid.uuid4().hex
    targets = [who.place / f"escape-{token}", Path("/tmp") / f"escape-{token}", who.home / f"escape-{token}",
               who.runs / f"escape-{token}"]
    try:
        _, outcome = who.run(f"""
def custom_kernel(data):
    written = []
    for path in {[str(t) for t in targets]!r}:
        try:
            with open(path, "w") as out:
                out.write("x")
            written.append(path)
        except OSError:
            pass
    return "wrote " + ",".join(written) if written else "denied"
""")
        # In the sandbox some of these paths may exist, in a private tmpfs; what counts is the host.
        assert outcome.startswith(("wrote", "denied"))
        assert not [t for t in targets if t.exists()]
    finally:
        for target in targets:
            target.unlink(missing_ok=True)


def test_a_double_forked_daemon_dies_with_the_run_and_never_rewrites_its_result(who):
    token = uuid.uuid4().hex
    tag = uuid.uuid4().hex[:12]
    target = str(who.result(tag))
    daemon = (f"import time\nwhile True:\n    try:\n        open({target!r}, 'w').write('forged')\n"
              "    except OSError:\n        pass\n    time.sleep(0.02)\n")
    try:
        result, outcome = who.run(f"""
import os, sys
def custom_kernel(data):
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", {daemon!r}, "{token}"])
        os._exit(0)
    os.waitpid(first, 0)
    return "spawned"
""", tag=tag)
        assert outcome == "spawned"
        survivors = processes_with(token)
        assert survivors == [], "the daemon outlived its run"
        assert FullResult.model_validate_json(who.result(tag).read_text()).success
    finally:
        kill_all(processes_with(token))


@pytest.mark.slow
def test_another_concurrent_run_is_unreachable(who):
    token = uuid.uuid4().hex
    victim = who.start(f"""
import time
SECRET = "{token}"
def custom_kernel(data):
    time.sleep(60)
""", "victim", timeout=90)
    try:
        deadline = time.monotonic() + 60
        while not any(token in Path(f).read_text() for f in glob.glob(str(who.runs / "kernelbot-run-*/run/*.py"))):
            assert time.monotonic() < deadline and victim.poll() is None, "the victim's run never started"
            time.sleep(0.05)  # waiting for the victim's files to exist, not for a race to settle
        _, outcome = who.run(f"""
import glob, os
WANTED = "{token[::-1]}"[::-1].encode()  # not the token itself, which would be found in this very file
def custom_kernel(data):
    found = []
    for pattern in ("{who.runs}/*/run/*", "{who.runs}/*/*", "/tmp/kernelbot-run-*/run/*", "/tmp/*/run/*"):
        for path in glob.glob(pattern):
            try:
                if WANTED in open(path, "rb").read():
                    found.append(path)
            except OSError:
                pass
    for base in glob.glob("{who.runs}/kernelbot-run-*"):  # by name, should listing be closed
        for name in ("run/submission.py", "run/harness.py"):
            try:
                if WANTED in open(os.path.join(base, name), "rb").read():
                    found.append(base)
            except OSError:
                pass
    return "found " + ",".join(found) if found else "nothing"
""")
    finally:
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
    assert outcome == "nothing"


def test_no_shared_memory_segment_or_temporary_file_outlives_the_run(who):
    key = int(uuid.uuid4().hex[:7], 16)
    token = uuid.uuid4().hex
    try:
        _, outcome = who.run(f"""
import ctypes, os
def custom_kernel(data):
    libc = ctypes.CDLL(None, use_errno=True)
    made = libc.shmget({key}, 4096, 0o1600)  # IPC_CREAT | 0600
    try:
        os.makedirs("/tmp/a/b", exist_ok=True)
        with open("/tmp/a/b/{token}", "w") as out:
            out.write("left behind")
    except OSError:  # another run's /tmp/a, left behind where /tmp is shared
        pass
    return "made %d" % made
""")
        assert outcome.startswith("made ") and int(outcome.split()[1]) >= 0, outcome
        segments = Path("/proc/sysvipc/shm").read_text().split("\n")[1:]
        assert not [line for line in segments if line.split() and int(line.split()[0]) == key]
        assert not Path(f"/tmp/a/b/{token}").exists()
    finally:
        subprocess.run(["ipcrm", "-M", str(key)], capture_output=True, check=False)
        Path(f"/tmp/a/b/{token}").unlink(missing_ok=True)


def test_no_connection_to_a_local_listener(who):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        _, outcome = who.run(connect_submission(port))
    assert outcome.startswith("refused")


def test_ptrace_and_process_vm_readv_reach_no_process(who):
    # PTRACE_SEIZE rather than ATTACH: where it succeeds (before the sandbox) it must not stop the runner.
    _, outcome = who.run("""
import ctypes, os, signal, time
def custom_kernel(data):
    libc = ctypes.CDLL(None, use_errno=True)
    reached = []
    child = os.fork()
    if child == 0:
        time.sleep(30)
        os._exit(0)
    pids = {child, os.getppid(), *(int(p) for p in os.listdir("/proc") if p.isdigit())} - {os.getpid(), 0}
    for pid in sorted(pids):
        if libc.ptrace(0x4206, pid, None, None) == 0:  # PTRACE_SEIZE
            reached.append("ptrace %d" % pid)
        local = ctypes.create_string_buffer(8)
        iov_local = (ctypes.c_void_p * 2)(ctypes.cast(local, ctypes.c_void_p).value, 8)
        iov_remote = (ctypes.c_void_p * 2)(0x1000, 8)
        ctypes.set_errno(0)
        done = libc.process_vm_readv(pid, iov_local, 1, iov_remote, 1, 0)
        if done != -1 or ctypes.get_errno() not in (1, 3):  # EPERM, ESRCH; EFAULT means the read was allowed
            reached.append("vm %d" % pid)
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    return "reached " + ",".join(reached) if reached else "none"
""")
    assert outcome == "none"


def test_the_sandbox_shows_no_device_but_the_basic_ones_and_the_pinned_gpu(who):
    _, outcome = who.run("""
import os
def custom_kernel(data):
    seen = sorted(os.listdir("/dev")) + sorted("dri/" + d for d in (os.listdir("/dev/dri") if os.path.isdir("/dev/dri") else []))
    return "gpus %s dev %s" % (os.environ.get("CUDA_VISIBLE_DEVICES", "-"), ",".join(seen))
""", CUDA_VISIBLE_DEVICES="1")
    gpus, devices = outcome.split()[1], outcome.split()[3].split(",")
    basic = {"core", "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty",
             "urandom", "zero"}
    pinned = {"nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"} if os.path.exists("/dev/nvidia1") else set()
    assert gpus == "1"
    assert set(devices) <= basic | pinned, sorted(set(devices) - basic)


def test_writing_stops_at_the_disk_quota():
    quota = 16 << 20
    payload = RunPayload(run_id="disk", gpu="cpu", lang="py", mode="test", main="harness.py", tests=[{"size": 1}],
                         test_timeout=60, sources={"harness.py": HARNESS, "submission.py": """
import os, tempfile
def custom_kernel(data):
    written = 0
    chunk = b"x" * (1 << 20)
    for place in (tempfile.gettempdir(), "/tmp", "/dev/shm", os.path.expanduser("~")):
        for index in range(24):
            try:
                with open(os.path.join(place, "fill-%d" % index), "wb") as out:
                    out.write(chunk)
                written += 1
            except OSError:
                break
    return "wrote %d" % written
"""})
    policy = SandboxPolicy(limits=replace(Limits(), disk=quota))
    result = execute(payload, sandbox=policy)
    assert result.success, result.error
    written = int(result.runs["test"].run.result["outcome"].split()[1])
    assert written <= 4 * (quota >> 20), written  # each of the four writable places holds the quota at most


def test_the_level_the_runner_reports_is_the_one_it_gave(who):
    result, _ = who.run("def custom_kernel(data):\n    return 'ok'\n")
    assert result.isolation == "full"
