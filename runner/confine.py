"""Confine one process, then exec the real program: `python -I -S confine.py SPEC_JSON -- PROGRAM ARGS...`.

Run by the runner in place of every harness, warm-up and compiler process (see runner/sandbox.py). A separate
exec rather than a `preexec_fn`, because the runner may be multi-threaded (the exploit suite runs stages side by
side) and Python code between fork and exec is unsafe there. Standard library only, started with -I -S, so nothing
from the run directory or the environment can run before the limits hold.

Order matters: resource limits first; then, while still privileged, a new network namespace (only its own
loopback, brought up so that ranks of one case can still talk to each other); then the privileges are dropped for
good (supplementary groups, gid, uid) and no-new-privileges is set, so user code can undo none of it.
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
    subdirectory the program needs. Everything else in the closed directory stays out of reach."""
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "cannot make the mounts private")
    for hidden, needed in masks:
        handle = os.open(needed, os.O_PATH | os.O_DIRECTORY)
        try:
            if libc.mount(b"tmpfs", hidden.encode(), b"tmpfs", 0, b"mode=0755,size=1m") != 0:
                raise OSError(ctypes.get_errno(), f"cannot cover {hidden}")
            os.makedirs(needed, exist_ok=True)
            source = f"/proc/self/fd/{handle}".encode()
            if libc.mount(source, needed.encode(), None, MS_BIND | MS_REC, None) != 0:
                raise OSError(ctypes.get_errno(), f"cannot expose {needed}")
        finally:
            os.close(handle)


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
        if spec.get("isolate_network"):
            isolate_network(libc)
        if spec.get("reveal"):
            reveal_paths(libc, spec["reveal"])
        if spec.get("uid") is not None:
            drop_privileges(spec["uid"], spec["gid"])
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    except (OSError, ValueError) as exc:
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
