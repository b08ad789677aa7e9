"""The seccomp filter of the run sandbox: classic BPF, as bwrap's `--seccomp FD` and `prctl(PR_SET_SECCOMP)` take it.

Denied with EPERM: the system calls that reach other processes' memory or descriptors (ptrace, process_vm_*,
pidfd_getfd; kcmp compares them), the kernel's key
rings, eBPF, userfaultfd (a tool for widening kernel races), perf events, module loading, kexec, every way of
changing mounts or the root, joining namespaces, new user namespaces (clone/unshare with CLONE_NEWUSER), file
handles (open_by_handle_at walks past bind mounts), io_uring, and clock, swap and reboot calls. clone3 answers
ENOSYS: its flags sit in memory a filter cannot read, and the C library then falls back to clone, whose flags it can.
A system call of any other architecture (x32, 32-bit x86 on a 64-bit kernel) kills the process: its numbers differ.
"""

from __future__ import annotations

import errno
import platform
import struct

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000
CLONE_NEWUSER = 0x10000000
RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
LD_ABS_W, JEQ_K, JSET_K, JGE_K, RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16

DENIED = {
    "x86_64": {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438, "keyctl": 250,
        "add_key": 248, "request_key": 249, "bpf": 321, "userfaultfd": 323, "perf_event_open": 298,
        "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "setns": 308,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "swapon": 167, "swapoff": 168, "reboot": 169, "acct": 163, "iopl": 172,
        "ioperm": 173, "quotactl": 179, "syslog": 103, "settimeofday": 164, "clock_settime": 227,
        "clock_adjtime": 305, "adjtimex": 159, "uselib": 134, "lookup_dcookie": 212, "vhangup": 153,
    },
    "aarch64": {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "pidfd_getfd": 438, "keyctl": 219,
        "add_key": 217, "request_key": 218, "bpf": 280, "userfaultfd": 282, "perf_event_open": 241,
        "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "setns": 268,
        "open_by_handle_at": 265, "name_to_handle_at": 264, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "swapon": 224, "swapoff": 225, "reboot": 142, "acct": 89, "quotactl": 60,
        "syslog": 116, "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171,
        "lookup_dcookie": 18, "vhangup": 58,
    },
}
# System calls allowed unless their first argument (the flags) asks for a new user namespace.
FLAG_CHECKED = {"x86_64": {"clone": 56, "unshare": 272}, "aarch64": {"clone": 220, "unshare": 97}}
CLONE3 = 435  # the same number on both


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_filter(machine: str | None = None, *, user_namespaces_only: bool = False) -> bytes:
    """The filter for `machine` (default: this one), as consecutive `struct sock_filter`s. Raises ValueError on an
    architecture this module has no table for (the sandbox then reports itself as not available).
    `user_namespaces_only`: deny nothing but new user namespaces, as a container runtime's default profile does
    (the shape of a host where the sandbox cannot be built; tests/support/no_user_namespaces.py)."""
    machine = machine or platform.machine()
    if machine not in AUDIT_ARCH:
        raise ValueError(f"no seccomp table for {machine}")
    eperm = RET_ERRNO | errno.EPERM
    program = [_insn(LD_ABS_W, OFFSET_ARCH), _insn(JEQ_K, AUDIT_ARCH[machine], 1, 0), _insn(RET_K, RET_KILL_PROCESS),
               _insn(LD_ABS_W, OFFSET_NR)]
    if machine == "x86_64":
        program += [_insn(JGE_K, X32_SYSCALL_BIT, 0, 1), _insn(RET_K, RET_KILL_PROCESS)]
    for number in [] if user_namespaces_only else sorted(set(DENIED[machine].values())):
        program += [_insn(JEQ_K, number, 0, 1), _insn(RET_K, eperm)]
    program += [_insn(JEQ_K, CLONE3, 0, 1), _insn(RET_K, RET_ERRNO | errno.ENOSYS)]
    for number in FLAG_CHECKED[machine].values():
        # Only the low 32 bits of the flags are loaded: CLONE_NEWUSER lies there on every architecture we support.
        program += [_insn(JEQ_K, number, 0, 4), _insn(LD_ABS_W, OFFSET_ARG0), _insn(JSET_K, CLONE_NEWUSER, 0, 1),
                    _insn(RET_K, eperm), _insn(RET_K, RET_ALLOW)]
    program.append(_insn(RET_K, RET_ALLOW))
    return b"".join(program)
