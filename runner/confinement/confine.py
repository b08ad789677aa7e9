"""Confine one process, then exec the real program: `python -I -S confine.py SPEC_JSON -- PROGRAM ARGS...`.

Run by the runner in place of every harness, warm-up and compiler process (see runner/confinement/sandbox.py). A
separate exec rather than a `preexec_fn`, because the runner may be multi-threaded (the exploit suite runs stages side
by side) and Python code between fork and exec is unsafe there. Standard library only, started with -I -S, so nothing
from the run directory or the environment can run before the limits hold.

Two ways to confine, chosen by the spec:

* `join` (the full sandbox, runner/confinement/bwrap.py): enter every namespace of the run's bubblewrap sandbox through
  its init's pidfd, make the run directory read-only in a private copy of its mounts (unless the process is the
  compiler, which writes its binary there), drop every capability and become the sandbox uid, set no-new-privileges
  and the seccomp filter, then fork: the child, inside the sandbox's PID namespace, runs the program; the parent
  waits outside and ends the way the child ended. runner/launching/warm_child.py applies the same `join` to a warm fork.
* otherwise (limits only, where no user namespace can be made): resource limits; as root also a new network
  namespace (only its own loopback, up so that ranks of one case can still talk to each other), the mount masks,
  and the per-run uid.

Resource limits come first either way, and privileges are dropped before anything of the run can execute.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import resource
import socket
import struct
import sys

CLONE_NEWNET, CLONE_NEWNS = 0x40000000, 0x00020000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP = 0x10000000, 0x20000000, 0x08000000, \
    0x04000000, 0x02000000
JOINED = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWCGROUP
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT = 0x1, 0x2, 0x4, 0x20
PR_SET_SECCOMP, SECCOMP_MODE_FILTER, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 22, 2, 24, 47, 4
SYS_CAPSET, LINUX_CAPABILITY_VERSION_3 = {"x86_64": 126, "aarch64": 91}, 0x20080522
MS_REC, MS_PRIVATE, MS_BIND = 0x4000, 0x40000, 0x1000
PR_SET_NO_NEW_PRIVS = 38
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
LIMITS = {"address_space": resource.RLIMIT_AS, "cpu_seconds": resource.RLIMIT_CPU,
          "file_size": resource.RLIMIT_FSIZE, "processes": resource.RLIMIT_NPROC}
EXIT_CONFINE_FAILED = 125


def apply_limits(limits: dict) -> None:
    for name, value in limits.items():
        if value is None:
            continue
        # CPU: SIGXCPU at the soft limit, SIGKILL a second later should the program ignore SIGXCPU.
        hard = value + 1 if name == "cpu_seconds" else value
        resource.setrlimit(LIMITS[name], (value, hard))


def bring_loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(probe, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


def isolate_network(libc) -> None:
    if libc.unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")
    bring_loopback_up()


def reveal_paths(libc, masks: list[list[str]]) -> None:
    """In a private mount namespace, cover each `[hidden, needed]` pair's closed directory (e.g. a 0700 /root
    holding the interpreter under /root/.pyenv) with an empty world-readable tmpfs, and bind back only the
    directories the program needs. Everything else in the closed directory stays out of reach."""
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "cannot make the mounts private")
    handles = []  # all opened first: once a directory is covered, what it held cannot be opened any more
    try:
        for hidden, needed in masks:
            handles.append((hidden, needed, os.open(needed, os.O_PATH | os.O_DIRECTORY)))
        covered = set()
        for hidden, needed, handle in handles:
            if hidden not in covered:
                if libc.mount(b"tmpfs", hidden.encode(), b"tmpfs", 0, b"mode=0755,size=1m") != 0:
                    raise OSError(ctypes.get_errno(), f"cannot cover {hidden}")
                covered.add(hidden)
            os.makedirs(needed, exist_ok=True)
            source = f"/proc/self/fd/{handle}".encode()
            if libc.mount(source, needed.encode(), None, MS_BIND | MS_REC, None) != 0:
                raise OSError(ctypes.get_errno(), f"cannot expose {needed}")
    finally:
        for _, _, handle in handles:
            os.close(handle)


class _Filter(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_seccomp(libc, program: bytes) -> None:
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _Filter(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot install the seccomp filter")


def drop_bounding_capabilities(libc) -> None:
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        last = int(handle.read())
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


def drop_capabilities(libc) -> None:
    """Empty permitted, effective and inheritable sets: entering a user namespace grants every capability in it,
    and a uid that does not change from non-zero would keep them."""
    header = struct.pack("=Ii", LINUX_CAPABILITY_VERSION_3, 0)
    data = ctypes.create_string_buffer(24)  # two zeroed __user_cap_data_struct
    number = SYS_CAPSET[os.uname().machine]
    if libc.syscall(number, ctypes.c_char_p(header), data) != 0:
        raise OSError(ctypes.get_errno(), "cannot drop the capabilities")


def join(libc, spec: dict) -> None:
    """Enter the run's sandbox (see the module docstring). Returns in the child only; the parent never returns."""
    pid = int(spec["pid"])
    import signal

    cwd = os.getcwd()  # the same path inside: the sandbox binds the run's files where they are outside
    pidfd = os.pidfd_open(pid)
    try:
        # The pidfd pins the process: if it is still alive after the namespace was read, the namespace is its.
        if os.stat(f"/proc/{pid}/ns/user").st_ino != spec["userns"]:
            raise OSError(0, "the run's sandbox is gone")
        signal.pidfd_send_signal(pidfd, 0)  # raises if it ended meanwhile
        if os.geteuid() == 0:
            os.setgroups([])  # root's groups would stay unmapped, but present, in the sandbox
        if libc.setns(pidfd, JOINED) != 0:
            raise OSError(ctypes.get_errno(), "cannot enter the run's sandbox")
    finally:
        os.close(pidfd)
    if spec.get("readonly"):
        if libc.unshare(CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "cannot copy the sandbox's mounts")
        for path in spec["readonly"]:
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
            if libc.mount(None, path.encode(), None, flags, None) != 0:
                raise OSError(ctypes.get_errno(), f"cannot make {path} read-only")
    drop_bounding_capabilities(libc)  # first: emptying it needs the capabilities the uid change ends
    os.setresgid(spec["gid"], spec["gid"], spec["gid"])
    os.setresuid(spec["uid"], spec["uid"], spec["uid"])
    drop_capabilities(libc)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot set no-new-privileges")
    install_seccomp(libc, bytes.fromhex(spec["seccomp"]))
    child = os.fork()  # a process joins a PID namespace only through its children
    if child == 0:
        try:
            os.chdir(cwd)
        except OSError:  # a directory the sandbox does not hold (a warm fork's, which then enters the run's own)
            os.chdir("/")
        return
    _mirror(child)


def _mirror(child: int) -> None:
    """Wait for the child inside the sandbox and end as it did, so whoever waits for us sees its status."""
    import signal

    for fd in range(3, 1024):
        try:
            os.close(fd)
        except OSError:
            pass
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            os._exit(EXIT_CONFINE_FAILED)
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def drop_privileges(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: confine.py SPEC_JSON -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    spec = json.loads(argv[1])
    program = argv[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        apply_limits(spec.get("limits", {}))
        if spec.get("join"):
            join(libc, spec["join"])
        if spec.get("isolate_network"):
            isolate_network(libc)
        if spec.get("reveal"):
            reveal_paths(libc, spec["reveal"])
        if spec.get("uid") is not None:
            drop_privileges(spec["uid"], spec["gid"])
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    except (OSError, ValueError, KeyError) as exc:
        print(f"sandbox: cannot confine the process: {exc}", file=sys.stderr)
        return EXIT_CONFINE_FAILED
    try:
        os.execvp(program[0], program)
    except OSError as exc:
        print(f"sandbox: cannot execute {program[0]!r}: {exc}", file=sys.stderr)
        return 127
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
