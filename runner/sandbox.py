"""The sandbox of the local runner (harness.md §8.3): what confines the harness, warm-up and compiler processes.

Per run: a fresh directory (`RunSandbox.base`) holding the run files (`run/`, read-only to user code when running
as root), a private HOME and TMPDIR (also holding the inline-extension build cache, the one thing that persists
between the stages of a run) and the case files; an environment scrubbed of secrets (runner/environment.py).
Per process, applied by runner/confine.py before the program is exec'd: limits on address space, CPU time, file
size and process count; when the runner is root, a new network namespace (no route to the host's NATS, Postgres or
anything else; its own loopback only) and a dedicated unprivileged uid per run.

Without root, or in a container that may not create namespaces (documented fallback): no network namespace (an unprivileged user namespace is not relied on, since
many hosts disable it), no uid switch; the process limit then counts every task of the runner's user, so it is
set to that user's current count plus the allowance. Resource limits and the process-group kill hold either way.
The address-space limit is off on GPU hosts: the CUDA driver reserves virtual address space far beyond physical
memory, so there the agent's cgroup memory limit is the bound.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

CONFINE_SCRIPT = Path(__file__).with_name("confine.py")
UID_RANGE = range(61_000, 62_000)  # dedicated sandbox uids; none needs a passwd entry
LOCK_DIR = Path(tempfile.gettempdir()) / "kernelbot-sandbox-uids"
SHARED_WRITABLE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
GIB = 1 << 30


@dataclass(frozen=True)
class Limits:
    address_space: int | None = 32 * GIB
    # CPU seconds per process: `cpu_seconds`, else stage timeout x factor + 10 (a backstop, not the timer: it also
    # ends processes that escaped the process group and threads burning several cores).
    cpu_seconds: int | None = None
    cpu_factor: float | None = 4.0
    file_size: int | None = 1 * GIB
    processes: int | None = 512  # tasks (processes and threads) of the run's uid

    def for_timeout(self, timeout: float, ranks: int = 1, extra_processes: int = 0) -> dict:
        return {"address_space": self.address_space,
                "cpu_seconds": self.cpu_seconds if self.cpu_seconds is not None
                else int(timeout * self.cpu_factor) + 10 if self.cpu_factor else None,
                "file_size": self.file_size,
                "processes": None if self.processes is None else self.processes * ranks + extra_processes}


@dataclass(frozen=True)
class SandboxPolicy:
    """How runs are confined. `isolate`: None uses the network namespace and the per-run uid where this host
    allows them (root, and the capability to create namespaces); False never; True requires them."""

    limits: Limits = field(default_factory=Limits)
    isolate: bool | None = None

    @property
    def isolating(self) -> bool:
        if self.isolate is False:
            return False
        available = isolation_available()
        if self.isolate and not available:
            raise RuntimeError("sandbox isolation needs root and the right to create network and mount namespaces")
        return available

    def for_gpu_host(self) -> SandboxPolicy:
        return replace(self, limits=replace(self.limits, address_space=None))


class RunSandbox:
    """One run's directory, uid and confinement. Use as a context manager; everything is removed on exit.
    Without a policy the processes run unconfined (tests of the protocol), still in a fresh directory."""

    def __init__(self, policy: SandboxPolicy | None, parent: Path | None = None) -> None:
        self.policy = policy
        self.base = Path(tempfile.mkdtemp(prefix="kernelbot-run-", dir=parent))
        self.run_dir, self.home, self.tmp = self.base / "run", self.base / "home", self.base / "tmp"
        self.uid: int | None = None
        self._lock = None

    def __enter__(self) -> RunSandbox:
        for directory in (self.run_dir, self.home, self.tmp):
            directory.mkdir()
        if self.policy is not None and self.policy.isolating:
            self.uid, self._lock = _claim_uid()
            os.chmod(self.base, 0o711)  # the uid may enter, not list
            for directory in (self.home, self.tmp):
                os.chown(directory, self.uid, self.uid)
        return self

    def __exit__(self, *exc_info) -> None:
        try:
            if self.uid is not None:
                kill_uid(self.uid)
                remove_files_of(self.uid)
        finally:
            for directory in [self.run_dir, *self.run_dir.rglob("*")]:
                if directory.is_dir() and not directory.is_symlink():
                    os.chmod(directory, 0o755)  # sealed directories must become deletable again
            shutil.rmtree(self.base, ignore_errors=True)
            if self._lock is not None:
                self._lock.close()

    def kill_strays(self) -> None:
        """Kill what a finished process of this run left behind, even outside its process group."""
        if self.uid is not None:
            kill_uid(self.uid)

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """The scrubbed environment with this run's private HOME, TMPDIR and build caches."""
        cache = str(self.home / ".cache")
        return {**env, "HOME": str(self.home), "TMPDIR": str(self.tmp), "XDG_CACHE_HOME": cache,
                "TORCH_EXTENSIONS_DIR": str(self.home / ".cache" / "torch_extensions"),
                "TRITON_CACHE_DIR": str(self.home / ".cache" / "triton")}

    def seal(self) -> None:
        """Make the run files read-only to user code: owned by the runner, no write bits (root: the sandbox uid
        cannot change that; without root the owner could, which is the documented weakness of that mode)."""
        owner = os.getuid()
        for path in [self.run_dir, *self.run_dir.rglob("*")]:
            os.chown(path, owner, owner, follow_symlinks=False)
            executable = path.is_dir() or os.stat(path).st_mode & 0o100
            os.chmod(path, 0o555 if executable else 0o444)

    def open_for_build(self) -> None:
        """Let the compiler, confined to the run's uid, write its binary into the run directory."""
        if self.uid is not None:
            os.chown(self.run_dir, self.uid, self.uid)

    def wrap(self, argv: list[str], timeout: float, ranks: int = 1) -> list[str]:
        """`argv` run under runner/confine.py with this run's limits, namespace and uid; the process allowance is
        per rank (a multi-GPU case runs one worker per rank)."""
        spec = self.confinement(timeout, ranks)
        if spec is None:
            return argv
        return [sys.executable, "-I", "-S", str(CONFINE_SCRIPT), json.dumps(spec), "--", *argv]

    def confinement(self, timeout: float, ranks: int = 1) -> dict | None:
        """What runner/confine.py applies to one process of this run (None: unconfined); the warm runner applies
        the same to the processes it forks."""
        if self.policy is None:
            return None
        extra_processes = 0
        if self.policy.limits.processes is not None and not self.policy.isolating:
            extra_processes = tasks_of_uid(os.getuid())  # the limit counts the runner's whole user
        return {"limits": self.policy.limits.for_timeout(timeout, ranks, extra_processes),
                "isolate_network": self.policy.isolating, "uid": self.uid, "gid": self.uid,
                "reveal": closed_ancestors(interpreter_paths()) if self.uid is not None else []}


@functools.lru_cache(maxsize=1)
def isolation_available() -> bool:
    """Root, and confine.py can create the namespaces (a container without CAP_SYS_ADMIN cannot: run it with
    `--network none` instead, and the per-run uid is then not used either)."""
    if os.geteuid() != 0:
        return False
    spec = {"isolate_network": True, "reveal": closed_ancestors(interpreter_paths())}
    try:
        done = subprocess.run([sys.executable, "-I", "-S", str(CONFINE_SCRIPT), json.dumps(spec), "--", "true"],
                              capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def interpreter_paths() -> list[str]:
    """What a sandboxed Python needs to read: the real interpreter and its standard library (the venv too)."""
    return sorted({os.path.dirname(os.path.realpath(sys.executable)), os.path.realpath(sys.base_prefix),
                   os.path.realpath(sys.prefix)})


def closed_ancestors(paths: list[str]) -> list[list[str]]:
    """For each path, the first ancestor others cannot traverse, paired with its child on the way to the path:
    runner/confine.py covers the first and exposes the second (a pyenv under a 0700 /root, say)."""
    masks: dict[str, str] = {}
    for path in paths:
        parts = Path(path).parts
        for depth in range(1, len(parts) - 1):
            ancestor = Path(*parts[: depth + 1])
            if not os.stat(ancestor).st_mode & stat.S_IXOTH:
                masks.setdefault(str(ancestor), str(Path(*parts[: depth + 2])))
                break
    return [[hidden, needed] for hidden, needed in sorted(masks.items())]


def _claim_uid():
    """A sandbox uid no other run on this host holds, kept by an flock for the run's life."""
    LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
    candidates = list(UID_RANGE)
    random.shuffle(candidates)
    for uid in candidates:
        handle = open(LOCK_DIR / f"{uid}.lock", "w")  # noqa: SIM115 - held until the run ends
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        kill_uid(uid)  # leftovers of a crashed runner
        return uid, handle
    raise RuntimeError("no free sandbox uid")


def kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid`: also those that left the process group (setsid) to outlive the run."""
    subprocess.run(["kill", "-KILL", "-1"], user=uid, group=uid, extra_groups=[], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def remove_files_of(uid: int) -> None:
    """Whatever the uid left in world-writable places, so nothing persists into another submission's run."""
    for directory in SHARED_WRITABLE_DIRS:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def tasks_of_uid(uid: int) -> int:
    """Live processes and threads owned by `uid` (what RLIMIT_NPROC counts)."""
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1 ").split()[0]) == uid and not fields.get("State", "").strip().startswith("Z"):
            count += int(fields.get("Threads", "1").strip())
    return count


def sandbox_level() -> tuple[str, str]:
    """How this host confines runs: ("full", what) or ("limits-only", a one-line reason). The scorer ranks only
    `full` runs outside development mode; `kernelbot up` and `kernelbot host-check` say which one a host gives."""
    if os.geteuid() != 0:
        return "limits-only", "the runner is not root, so it cannot give a run its own uid and network namespace"
    if not isolation_available():
        return "limits-only", ("the runner may not create network and mount namespaces here "
                               "(a container without CAP_SYS_ADMIN?)")
    return "full", "a network namespace and a dedicated uid per run"
