"""The warm runner (runner/warm.py): runs forked from one long-lived server holding torch, through runner.stages.execute
with the local runner's sandbox, exactly as the local backend runs them.

What one submission does to its process (modules, torch, builtins, environment, signals, umask, rlimits, files
in its home) must not be visible to the next run forked from the same server; the seed must reach the harness
as in a cold start and never reach user code; a server that is gone means a cold start, not a failure.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from problems import PROBLEMS_ROOT
from runner.confinement.sandbox import SandboxPolicy
from runner.launching.warm_client import WarmLauncher, fork_runner
from runner.stages.execute import execute
from runner.task.payload import build_payload
from runner.task.taskfile import load_problem
from schemas.contracts import FullResult, RunPayload
from tests.support.warm import warm_runner

SECRET = 1_987_654_321

# Changes everything a Python process can change about itself, and checks within its own run that they stick.
MUTATE = '''
import builtins, os, resource, signal, sys, types
import torch

def _mark():
    builtins.kb_leak = "builtins"
    sys.modules["kb_leak_module"] = types.ModuleType("kb_leak_module")
    torch.kb_leak = "torch module"
    torch.Tensor.kb_leak = "torch class"
    torch.add = lambda *a, **k: None
    torch.manual_seed(1234)
    torch.set_num_threads(2)
    os.environ["KB_LEAK"] = "environment"
    signal.signal(signal.SIGUSR1, lambda *_: None)
    os.umask(0o077)
    resource.setrlimit(resource.RLIMIT_NOFILE, (77, 77))
    sys.setrecursionlimit(4321)
    with open(os.path.join(os.path.expanduser("~"), "kb_leak.txt"), "w") as handle:
        handle.write("file")

_mark()

def custom_kernel(data):
    assert builtins.kb_leak and getattr(torch.Tensor, "kb_leak", None) and os.environ["KB_LEAK"]
    print("mutated in", os.getpid(), flush=True)
    return data.clone()
'''

# Fails its run when it finds any trace of MUTATE.
DETECT = '''
import builtins, os, resource, signal, sys
import torch

def _traces():
    found = []
    found += ["builtins"] if hasattr(builtins, "kb_leak") else []
    found += ["module"] if "kb_leak_module" in sys.modules else []
    found += ["torch module"] if hasattr(torch, "kb_leak") else []
    found += ["torch class"] if hasattr(torch.Tensor, "kb_leak") else []
    found += ["torch.add"] if getattr(torch.add, "__name__", "") == "<lambda>" else []
    found += ["torch seed"] if torch.initial_seed() == 1234 else []
    found += ["environment"] if "KB_LEAK" in os.environ else []
    found += ["signal"] if signal.getsignal(signal.SIGUSR1) is not signal.SIG_DFL else []
    old = os.umask(0o022); os.umask(old)
    found += ["umask"] if old == 0o077 else []
    found += ["rlimit"] if resource.getrlimit(resource.RLIMIT_NOFILE) == (77, 77) else []
    found += ["recursion limit"] if sys.getrecursionlimit() == 4321 else []
    found += ["file"] if os.path.exists(os.path.join(os.path.expanduser("~"), "kb_leak.txt")) else []
    return found

def custom_kernel(data):
    found = _traces()
    if found:
        raise RuntimeError("leaked from an earlier run: " + ", ".join(found))
    print("clean in", os.getpid(), flush=True)
    return data.clone()
'''

# Prints what its inputs were (so warm and cold runs can be compared) and looks for the secret everywhere user
# code can look: its environment, /proc/self/environ and every writable mapping of its own memory. It knows only
# the secret's hash (holding the digits would plant them in its own memory): every 10-digit number found is hashed.
INSPECT = '''
import ctypes, hashlib, os, re

ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # dumpable again (the harness made it not), so /proc/self opens for us
NUMBER = re.compile(rb"(?<![0-9])[0-9]{10}(?![0-9])")

def _found(text, target):
    return any(hashlib.sha256(m.group()).hexdigest() == target for m in NUMBER.finditer(text))

def _secret_visible(target):
    if _found(open("/proc/self/environ", "rb").read(), target):
        return "/proc/self/environ"
    if _found("\\n".join(os.environ.values()).encode(), target):
        return "os.environ"
    with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if "rw" not in perms or "[vvar" in line or "[vsyscall" in line:
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            for offset in range(start, end, 1 << 24):  # 16 MiB at a time, overlapping by a number's length
                try:
                    mem.seek(offset)
                    if _found(mem.read(min(end - offset, (1 << 24) + 10)), target):
                        return line.strip()
                except (OSError, ValueError, OverflowError):
                    break
    return ""

SEEN = []

def custom_kernel(data):
    if not SEEN:
        planted = str(1_000_000_000 + 2 * 12_345)  # made at run time: proves the scan sees what is there
        assert _secret_visible(hashlib.sha256(planted.encode()).hexdigest()), "the memory scan finds nothing"
        print("secret visible:", _secret_visible("TARGET") or "no", flush=True)
        print("variables:", sorted(k for k in os.environ if k.startswith(("POPCORN", "KERNELBOT"))), flush=True)
    SEEN.append(1)
    print("input", hashlib.sha256(str(data.tolist()).encode()).hexdigest()[:16], flush=True)
    return data.clone()
'''


@pytest.fixture(scope="module")
def warm():
    with warm_runner() as (launcher, server):
        yield launcher, server


def run(code: str, launcher: WarmLauncher | None, mode: str = "test", seed: int | None = None) -> FullResult:
    task = load_problem(PROBLEMS_ROOT / "examples" / "identity_py").task
    payload = build_payload(task, code, run_id="warm", gpu="cpu", mode=mode, secret=seed is not None, seed=seed)
    result = execute(payload, sandbox=SandboxPolicy(), warm=launcher)
    assert result.success, result.error
    return result


def test_nothing_one_submission_changes_is_seen_by_the_next_run_from_the_same_server(warm):
    launcher, server = warm
    combined = run(MUTATE.replace("def custom_kernel", "def _mutating_kernel") + DETECT, launcher)
    stage = combined.runs["test"].run
    # The detector works: in the process that changed everything, it finds every change.
    assert not stage.passed and "leaked from an earlier run: builtins, module, torch module, torch class" in \
        stage.result.get("test.0.error", ""), stage.result

    mutated = run(MUTATE, launcher)
    assert mutated.runs["test"].run.passed, mutated.runs["test"].run.stderr
    assert "mutated in" in mutated.runs["test"].run.stdout
    clean = run(DETECT, launcher)
    stage = clean.runs["test"].run
    assert stage.passed, (stage.result, stage.stderr)
    assert "clean in" in stage.stdout
    assert server.poll() is None  # one server served all three


def test_runs_are_forked_from_the_server_not_started_cold(warm):
    launcher, server = warm
    # Inside the run's PID namespace the server has no pid; what it imported before the fork tells it apart.
    code = ("import sys\ndef custom_kernel(data):\n"
            "    print('forked', 'runner.launching.warm_child' in sys.modules, flush=True)\n    return data.clone()\n")
    stage = run(code, launcher).runs["test"].run
    assert stage.passed, stage.stderr
    assert "forked True" in stage.stdout and server.poll() is None, stage.stdout


@pytest.mark.slow
def test_a_seed_reaches_the_forked_harness_as_in_a_cold_start_and_never_user_code(warm):
    launcher, _ = warm
    code = INSPECT.replace("TARGET", hashlib.sha256(str(SECRET).encode()).hexdigest())
    warm_run = run(code, launcher, seed=SECRET)
    cold_run = run(code, None, seed=SECRET)
    public_run = run(code, launcher, seed=SECRET + 1)
    inputs = {}
    for label, result in (("warm", warm_run), ("cold", cold_run), ("other seed", public_run)):
        stage = result.runs["test"].run
        assert stage.passed, (label, stage.result, stage.stderr)
        assert "secret visible: no" in stage.stdout, (label, stage.stdout)
        assert "variables: []" in stage.stdout, (label, stage.stdout)
        inputs[label] = [line for line in stage.stdout.splitlines() if line.startswith("input ")]
    assert inputs["warm"] == inputs["cold"] and inputs["warm"]  # the seed was applied, the same way
    assert inputs["warm"] != inputs["other seed"]


def test_without_a_server_the_run_starts_cold(tmp_path):
    gone = WarmLauncher(tmp_path / "no-such.sock")
    result = run((PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text(), gone)
    assert result.runs["test"].run.passed


@pytest.mark.slow
def test_a_timed_out_forked_stage_is_killed_with_its_group(warm):
    launcher, server = warm
    task = load_problem(PROBLEMS_ROOT / "examples" / "identity_py").task
    task = task.model_copy(update={"test_timeout": 3})
    code = "import time, subprocess\ndef custom_kernel(data):\n    time.sleep(600)\n"
    payload = build_payload(task, code, run_id="warm-timeout", gpu="cpu", mode="test", secret=False, seed=None)
    result = execute(payload, sandbox=SandboxPolicy(), warm=launcher)
    stage = result.runs["test"].run
    assert stage.exit_code == 114 and not stage.passed
    assert server.poll() is None
    children = [p for p in os.listdir("/proc") if p.isdigit() and _parent(p) == server.pid and not _sandbox(p)]
    assert children == [], children  # killed and reaped (the next run's sandbox, built ahead, stays)


def _sandbox(pid: str) -> bool:
    try:
        return b"bwrap" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _parent(pid: str) -> int:
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return -1



def test_a_file_of_the_run_shadows_a_module_the_server_imported_as_in_a_cold_start(warm):
    """The server imported `yaml` and `runner`; a problem shipping `yaml.py` gets its own file, as cold."""
    launcher, _ = warm
    task = load_problem(PROBLEMS_ROOT / "examples" / "identity_py").task
    task = task.model_copy(update={"files": {**task.files, "yaml.py": "SHADOW = 'the run directory'\n"}})
    code = "import yaml\n\ndef custom_kernel(data):\n    return data.clone()\n"
    harness = task.files["eval.py"].replace("def main(argv", "import yaml\nprint('yaml from', yaml.SHADOW)\n\n\ndef main(argv", 1)
    task = task.model_copy(update={"files": {**task.files, "eval.py": harness}})
    payload = build_payload(task, code, run_id="shadow", gpu="cpu", mode="test", secret=False, seed=None)
    for launch in (launcher, None):
        stage = execute(payload, sandbox=SandboxPolicy(), warm=launch).runs["test"].run
        assert "yaml from the run directory" in stage.stdout, (launch, stage.stdout, stage.stderr)


SPAWN_POOL = """
class Carried:
    def __init__(self, n):
        self.n = n


def _carry(n):
    return Carried(n)


def _spawned_back():
    import multiprocessing
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        print("carried back", type(pool.apply(_carry, (7,))).__module__, flush=True)


"""


def test_a_spawn_pool_returns_objects_of_the_programs_own_classes_as_in_a_cold_start(warm):
    """A stock harness gets its `__main__` classes back from a spawn pool (pmpp_v2's does, with its Stats). The worker
    sends them as `__mp_main__.<class>`, which must name the harness's module, not the fork server's."""
    launcher, _ = warm
    task = load_problem(PROBLEMS_ROOT / "examples" / "identity_py").task
    harness = task.files["eval.py"].replace('if __name__ == "__main__":\n',
                                            SPAWN_POOL + 'if __name__ == "__main__":\n    _spawned_back()\n', 1)
    assert "_spawned_back()" in harness
    task = task.model_copy(update={"files": {**task.files, "eval.py": harness}})
    payload = build_payload(task, "def custom_kernel(data):\n    return data.clone()\n", run_id="spawn", gpu="cpu",
                            mode="test", secret=False, seed=None)
    for launch in (launcher, None):
        stage = execute(payload, sandbox=SandboxPolicy(), warm=launch).runs["test"].run
        assert "carried back __main__" in stage.stdout, (launch, stage.stdout, stage.stderr[-2000:])
        assert stage.passed, (launch, stage.stderr[-2000:])


def test_a_forked_run_writes_its_temporary_files_into_its_own_private_directory(warm):
    """tempfile caches the temporary directory per process: the server's must not be the run's (the run's TMPDIR
    is private to it; the shared /tmp would carry files from one run to the next)."""
    launcher, _ = warm
    code = ("import os, tempfile\nprint('tempdir', tempfile.gettempdir(), os.environ['TMPDIR'], flush=True)\n"
            "def custom_kernel(data):\n    return data.clone()\n")
    stage = run(code, launcher).runs["test"].run
    line = next(line for line in stage.stdout.splitlines() if line.startswith("tempdir "))
    _, used, private = line.split()
    assert used == private and "kernelbot-run-" in used, line


def _running(pid: int) -> bool:
    """Whether `pid` is still running: not gone, not a zombie. It can go between two reads of /proc, so a
    vanished file means it ended (seen once: /proc/<pid>/stat gone after /proc/<pid> was found)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_a_forked_runner_runs_in_the_sandbox_the_server_built_ahead_and_nothing_of_it_is_left(warm, tmp_path):
    """Between runs the server starts the next run's bubblewrap sandbox (runner/confinement/sandbox.py prebuild), in the
    runs' directory of the last runner it forked; the next runner forked adopts it, so no run waits for bwrap."""
    import glob
    import time


    launcher, server = warm
    runs = tmp_path / "runs"
    runs.mkdir()
    os.chmod(tmp_path, 0o755)
    harness = ("import os\nprint('cwd', os.getcwd(), flush=True)\nout = os.fdopen(int(os.environ['POPCORN_FD']), 'w')\n"
               "out.write('test-count: 1\\ntest.0.status: pass\\ncheck: pass\\n')\n")
    payload = RunPayload(run_id="ahead", gpu="cpu", lang="py", mode="test", main="harness.py",
                         sources={"harness.py": harness}, tests=[{"size": 1}], test_timeout=30)

    def fork_and_wait(index: int) -> FullResult:
        payload_file, result_file = tmp_path / f"payload{index}.json", tmp_path / f"result{index}.json"
        payload_file.write_text(payload.model_dump_json())
        with open(tmp_path / "runner.log", "ab") as log:
            pid = fork_runner(launcher.socket_path, ["--payload", str(payload_file), "--result", str(result_file),
                                                     "--workdir", str(runs)], log.fileno())
        deadline = time.monotonic() + 60
        while _running(pid):
            assert time.monotonic() < deadline, "the runner did not end"
            time.sleep(0.01)  # waiting for the runner to end, an event, not a race
        return FullResult.model_validate_json(result_file.read_text())

    first = fork_and_wait(1)
    assert first.success and first.isolation == "full", first.error
    deadline = time.monotonic() + 30
    while not (built := glob.glob(str(runs / "kernelbot-run-*"))):
        assert time.monotonic() < deadline, "no sandbox was built ahead"
        time.sleep(0.01)
    second = fork_and_wait(2)
    stage = second.runs["test"].run
    assert second.isolation == "full" and stage.passed, (second.error, stage)
    assert f"cwd {built[0]}/run" in stage.stdout  # the run took the sandbox built ahead...
    assert not os.path.exists(built[0])  # ...and removed it when it ended
    assert server.poll() is None
