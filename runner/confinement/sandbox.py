"""The sandbox of the local runner (docs/security.md): what confines the harness, warm-up and compiler processes.

Per run: a fresh directory (`RunSandbox.base`) holding the run files (`run/`, read-only to user code), a private
HOME and TMPDIR (also holding the inline-extension build cache, the one thing that persists between the stages of
a run) and the case files; an environment holding only what a harness needs (runner/confinement/environment.py);
resource limits on address space, CPU time, file size and process count (runner/confinement/confine.py).

Two levels, which `sandbox_level()` reports and each result records (`FullResult.isolation`):

* "full": one bubblewrap sandbox per run (runner/confinement/bwrap.py), which every process of the run joins: its own
  user, PID, IPC, mount, network (loopback only), UTS and cgroup namespaces, a read-only view of the host's system
  directories only, size-limited tmpfs for every writable place, only the runner's GPUs, a seccomp filter, and no
  capabilities. As root the run also gets a uid of its own (61000-61999) outside the sandbox; as an ordinary user
  it needs unprivileged user namespaces, which most distributions allow. Nothing of a run outlives it.
* "limits-only": where no user namespace can be made (a container that forbids them, a kernel with them turned
  off): the resource limits and the process-group kill; as root also a network namespace and the per-run uid.
  Development only: the scorer refuses such results elsewhere.

A runner forked from the warm runner usually finds its full sandbox already built (`prebuild`, `offer`): the warm
runner builds the next one while a slot is idle.

The address-space limit is off on GPU hosts: the CUDA driver reserves virtual address space far beyond physical
memory, so there the agent's cgroup memory limit is the bound.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from runner.confinement.bwrap import Holder, SandboxUnavailable
from runner.confinement.run_uids import claim_uid, kill_uid, remove_files_of, tasks_of_uid

CONFINE_SCRIPT = Path(__file__).with_name("confine.py")
GIB = 1 << 30


@dataclass(frozen=True)
class Limits:
    address_space: int | None = 32 * GIB
    # CPU seconds per process: `cpu_seconds`, else stage timeout x factor + 10 (a backstop, not the timer: it also
    # ends processes that escaped the process group and threads burning several cores).
    cpu_seconds: int | None = None
    cpu_factor: float | None = 4.0
    file_size: int | None = 1 * GIB
    disk: int | None = 2 * GIB  # size of each writable tmpfs of the full sandbox (HOME, TMPDIR, /tmp, /dev/shm...)
    processes: int | None = 512  # tasks (processes and threads) of the run's uid

    def for_timeout(self, timeout: float, ranks: int = 1, extra_processes: int = 0) -> dict:
        return {"address_space": self.address_space,
                "cpu_seconds": self.cpu_seconds if self.cpu_seconds is not None
                else int(timeout * self.cpu_factor) + 10 if self.cpu_factor else None,
                "file_size": self.file_size,
                "processes": None if self.processes is None else self.processes * ranks + extra_processes}


@dataclass(frozen=True)
class SandboxPolicy:
    """How runs are confined. `isolate`: None uses the full sandbox where this host allows it and limits only
    elsewhere; False limits only; True requires the full sandbox (RuntimeError where it is not available)."""

    limits: Limits = field(default_factory=Limits)
    isolate: bool | None = None

    @property
    def level(self) -> str:
        if self.isolate is False:
            return "limits-only"
        level, reason = sandbox_level()
        if self.isolate and level != "full":
            raise RuntimeError(f"the full sandbox is not available here: {reason}")
        return level

    @property
    def isolating(self) -> bool:
        """For limits only, as root: a network namespace and the per-run uid (the older, hand-written isolation)."""
        return self.isolate is not False and isolation_available()

    def for_gpu_host(self) -> SandboxPolicy:
        return replace(self, limits=replace(self.limits, address_space=None))


class RunSandbox:
    """One run's directory, uid and confinement. Use as a context manager; everything is removed on exit.
    Without a policy the processes run unconfined (tests of the protocol), still in a fresh directory."""

    def __init__(self, policy: SandboxPolicy | None, parent: Path | None = None) -> None:
        spare = _offered.pop() if _offered else None
        if spare is not None and spare._fits(policy, parent):
            self.__dict__.update(spare.__dict__)  # the warm runner built it ahead for this run
            self.policy, self._adopted = policy, True
            return
        if spare is not None:
            spare.__exit__(None, None, None)
        self.policy, self._parent, self._adopted = policy, parent, False
        self.base = Path(tempfile.mkdtemp(prefix="kernelbot-run-", dir=parent))
        self.run_dir, self.home, self.tmp = self.base / "run", self.base / "home", self.base / "tmp"
        self.uid: int | None = None
        self.holder: Holder | None = None
        self.level = "limits-only"
        self._lock = None
        self._building = False

    def descriptors(self) -> set[int]:
        """The descriptors this sandbox holds open (a forked runner that adopts it must keep them)."""
        held: set[int] = {self._lock.fileno()} if self._lock is not None else set()
        return held | (self.holder.descriptors() if self.holder is not None else set())

    def _fits(self, policy: SandboxPolicy | None, parent: Path | None) -> bool:
        return (policy is not None and policy.isolate is not False and self.policy is not None
                and policy.limits.disk == self.policy.limits.disk
                and self.base.parent.resolve() == Path(parent or tempfile.gettempdir()).resolve())

    def __enter__(self) -> RunSandbox:
        if self._adopted:
            assert self.holder is not None
            try:
                self.holder.wait_ready()
                return self
            except (SandboxUnavailable, OSError):  # build one of its own below
                self.__exit__(None, None, None)
                self.__init__(self.policy, self._parent)  # type: ignore[misc]
        for directory in (self.run_dir, self.home, self.tmp):
            directory.mkdir()
        try:
            if self.policy is not None and self.policy.isolate is not False and _may_be_full():
                try:
                    self._build()
                except (SandboxUnavailable, OSError) as exc:
                    if self.policy.isolate:
                        raise RuntimeError(f"the full sandbox is not available here: {exc}") from exc
                    self._release_uid()
            if self.policy is not None and self.policy.isolate and self.holder is None:
                raise RuntimeError(f"the full sandbox is not available here: {sandbox_level()[1]}")
            if self.holder is None and self.policy is not None and self.policy.isolating:
                self.uid, self._lock = claim_uid()
                os.chmod(self.base, 0o711)
                for directory in (self.home, self.tmp):
                    os.chown(directory, self.uid, self.uid)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _build(self, wait: bool = True) -> None:
        """The run's bubblewrap sandbox; tried for each run rather than probed first, which would cost a cold
        runner process one more sandbox and process on every run."""
        if os.geteuid() == 0:
            self.uid, self._lock = claim_uid()
        os.chmod(self.base, 0o711)  # the uid may enter, not list
        self.holder = Holder.spawn(self.base, disk=self.policy.limits.disk if self.policy else None, uid=self.uid,
                                   reveal=_masks(self.base) if self.uid else [])
        if wait:
            try:
                self.holder.wait_ready()
            except BaseException:
                self.holder = None  # it ended itself; the run falls back (or fails) without it
                raise
        self.level = "full"

    def _release_uid(self) -> None:
        self.uid = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def __exit__(self, *exc_info) -> None:
        try:
            if self.holder is not None:
                self.holder.close()  # its init gone, the kernel kills the rest of the sandbox
            elif self.uid is not None:
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
        if self.holder is not None:
            self.holder.kill_strays()
        elif self.uid is not None:
            kill_uid(self.uid)

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """The scrubbed environment with this run's private HOME, TMPDIR and build caches."""
        cache = str(self.home / ".cache")
        return {**env, "HOME": str(self.home), "TMPDIR": str(self.tmp), "XDG_CACHE_HOME": cache,
                "TORCH_EXTENSIONS_DIR": str(self.home / ".cache" / "torch_extensions"),
                "TRITON_CACHE_DIR": str(self.home / ".cache" / "triton")}

    def seal(self) -> None:
        """Make the run files read-only to user code: owned by the runner, no write bits (root: the sandbox uid
        cannot change that; without root the owner could, which is why the full sandbox also mounts them read-only
        for every process but the compiler; limits only, without root, leaves that weakness)."""
        self._building = False
        owner = os.getuid()
        for path in [self.run_dir, *self.run_dir.rglob("*")]:
            os.chown(path, owner, owner, follow_symlinks=False)
            executable = path.is_dir() or os.stat(path).st_mode & 0o100
            os.chmod(path, 0o555 if executable else 0o444)

    def open_for_build(self) -> None:
        """Let the compiler, confined to the run's uid, write its binary into the run directory."""
        self._building = True
        if self.uid is not None:
            os.chown(self.run_dir, self.uid, self.uid)

    def wrap(self, argv: list[str], timeout: float, ranks: int = 1) -> list[str]:
        """`argv` run under runner/confinement/confine.py with this run's limits, namespace and uid; the process
        allowance is per rank (a multi-GPU case runs one worker per rank)."""
        spec = self.confinement(timeout, ranks)
        if spec is None:
            return argv
        return [sys.executable, "-I", "-S", str(CONFINE_SCRIPT), json.dumps(spec), "--", *argv]

    def confinement(self, timeout: float, ranks: int = 1) -> dict | None:
        """What runner/confinement/confine.py applies to one process of this run (None: unconfined); the warm runner
        applies the same to the processes it forks."""
        if self.policy is None:
            return None
        extra_processes = 0
        if self.policy.limits.processes is not None and self.uid is None:
            extra_processes = tasks_of_uid(os.getuid())  # the limit counts the runner's whole user
        limits = self.policy.limits.for_timeout(timeout, ranks, extra_processes)
        if self.holder is not None:
            return {"limits": limits, "join": self.holder.join_spec([] if self._building else [str(self.run_dir)])}
        return {"limits": limits,
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


def _masks(base: Path) -> list[list[str]]:
    """What bwrap, started as the run's uid, must be shown: the interpreter, and the run's own directory in full
    (pytest's and mkdtemp's directories nest several 0700 levels deep)."""
    masks = closed_ancestors(interpreter_paths())
    for ancestor in closed_ancestors([str(base)]):
        masks.append([ancestor[0], str(base)])
    return sorted(masks)


def closed_ancestors(paths: list[str]) -> list[list[str]]:
    """For each path, the first ancestor others cannot traverse, paired with its child on the way to the path:
    runner/confinement/confine.py covers the first and exposes the second (a pyenv under a 0700 /root, say)."""
    masks: dict[str, str] = {}
    for path in paths:
        parts = Path(path).parts
        for depth in range(1, len(parts) - 1):
            ancestor = Path(*parts[: depth + 1])
            if not os.stat(ancestor).st_mode & stat.S_IXOTH:
                masks.setdefault(str(ancestor), str(Path(*parts[: depth + 2])))
                break
    return [[hidden, needed] for hidden, needed in sorted(masks.items())]


_offered: list[RunSandbox] = []  # what the warm runner built ahead for the runner it forked (this process)


def prebuild(parent: Path | None) -> RunSandbox | None:
    """A full sandbox for the next run, bwrap started but not awaited: the warm runner builds one between runs and
    hands it to the runner it forks next (`offer`), so no run waits for bwrap and the sandbox's init."""
    if not _may_be_full():
        return None
    box = RunSandbox(SandboxPolicy(), parent)
    try:
        for directory in (box.run_dir, box.home, box.tmp):
            directory.mkdir()
        box._build(wait=False)
    except (SandboxUnavailable, OSError):
        box.__exit__(None, None, None)
        return None
    return box


def offer(box: RunSandbox) -> None:
    _offered[:] = [box]


def discard_offer() -> None:
    """The offered sandbox, if no run took it: ended and removed."""
    while _offered:
        _offered.pop().__exit__(None, None, None)


@functools.lru_cache(maxsize=1)
def sandbox_level() -> tuple[str, str]:
    """("full", what it gives) where this host can build the bubblewrap sandbox of runner/confinement/bwrap.py, tried
    once per process with a real run's sandbox and process; else ("limits-only", why not, in one line)."""
    problem = _full_sandbox_problem()
    if problem is None:
        return "full", ("bubblewrap: user, PID, IPC, mount, network, UTS and cgroup namespaces, seccomp, "
                        "read-only host, tmpfs quotas" + (", a uid per run" if os.geteuid() == 0 else ""))
    return "limits-only", problem


def _may_be_full() -> bool:
    """False only where this process already found that the full sandbox cannot be built."""
    return sandbox_level.cache_info().currsize == 0 or sandbox_level()[0] == "full"


def _full_sandbox_problem() -> str | None:
    probe = RunSandbox(None)
    try:
        with probe:
            probe._build()
            assert probe.holder is not None
            spec = {"join": probe.holder.join_spec([str(probe.run_dir)])}
            done = subprocess.run([sys.executable, "-I", "-S", str(CONFINE_SCRIPT), json.dumps(spec), "--", "true"],
                                  cwd=probe.run_dir, capture_output=True, timeout=30, check=False)
            if done.returncode != 0:
                lines = done.stderr.decode(errors="replace").strip().splitlines()
                return lines[-1] if lines else f"a process could not enter the sandbox ({done.returncode})"
    except (SandboxUnavailable, OSError, ValueError, subprocess.SubprocessError) as exc:
        return _userns_problem() or str(exc)
    return None


def _userns_problem() -> str | None:
    """The host setting that forbids unprivileged user namespaces, if one does."""
    for name, forbidding in (("kernel/unprivileged_userns_clone", "0"), ("user/max_user_namespaces", "0"),
                             ("kernel/apparmor_restrict_unprivileged_userns", "1")):
        try:
            value = Path("/proc/sys", name).read_text().strip()
        except OSError:
            continue
        if value == forbidding:
            return f"unprivileged user namespaces are disabled ({name.replace('/', '.')}={value})"
    return None
