"""The two kernel settings `kernelbot host-check` reports for the run sandbox: Yama's ptrace restriction and
user-namespace support, each read below the check's `--root` and said with what it means for the platform."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PTRACE_SCOPE = "kernel/yama/ptrace_scope"
SUPERVISORS = ("the harness supervisors make themselves non-dumpable, which closes them to their workers, and the "
               "sandbox's seccomp filter denies ptrace and process_vm_readv/writev")
PTRACE_MEANINGS = {
    "0": "classic: a process may read and write the memory of any dumpable process of its uid "
         f"(/proc/PID/mem); {SUPERVISORS}",
    "1": "restricted: only a process's ancestors may read its memory, so a worker cannot reach its supervisor "
         "even if the supervisor were dumpable",
    "2": "admin only: only a process with CAP_SYS_PTRACE may read another's memory",
    "3": "off: no process may attach to or read another's memory",
}
# The settings that forbid the unprivileged user namespaces bwrap builds a run's sandbox in (bwrap runs as the
# run's uid, not as root), with the value that forbids them.
USERNS_SWITCHES = (("user/max_user_namespaces", "0"), ("kernel/unprivileged_userns_clone", "0"),
                   ("kernel/apparmor_restrict_unprivileged_userns", "1"))


@dataclass(frozen=True)
class KernelSetting:
    name: str  # ptrace or userns
    value: str  # as the kernel shows it, e.g. `kernel.yama.ptrace_scope=0`, or what is missing
    meaning: str
    allows_sandbox: bool = True

    def line(self) -> str:
        return f"INFO {'host':<6} {self.name:<10} {self.value}: {self.meaning}"

    def as_json(self) -> dict[str, str | bool]:
        return {"value": self.value, "meaning": self.meaning, "allows_sandbox": self.allows_sandbox}


def _sysctl(root: Path, name: str) -> str | None:
    try:
        return (root / "proc" / "sys" / name).read_text().strip()
    except OSError:
        return None


def ptrace_setting(root: Path) -> KernelSetting:
    scope = _sysctl(root, PTRACE_SCOPE)
    if scope is None:
        return KernelSetting("ptrace", "no kernel.yama.ptrace_scope",
                             f"this kernel has no Yama: ptrace follows the classic rules, as with 0; {SUPERVISORS}")
    meaning = PTRACE_MEANINGS.get(scope, f"a value this check does not know; {SUPERVISORS}")
    return KernelSetting("ptrace", f"kernel.yama.ptrace_scope={scope}", meaning)


def userns_setting(root: Path) -> KernelSetting:
    if _sysctl(root, "user/max_user_namespaces") is None:
        return KernelSetting("userns", "no user.max_user_namespaces",
                             "this kernel has no user namespaces: runners here cannot build the run sandbox",
                             allows_sandbox=False)
    for name, forbidding in USERNS_SWITCHES:
        if _sysctl(root, name) == forbidding:
            return KernelSetting("userns", f"{name.replace('/', '.')}={forbidding}",
                                 "unprivileged user namespaces are disabled: runners here cannot build the run "
                                 "sandbox", allows_sandbox=False)
    limit = _sysctl(root, "user/max_user_namespaces")
    return KernelSetting("userns", f"user.max_user_namespaces={limit}",
                         "unprivileged user namespaces are allowed: bwrap can give each run its own user, PID, "
                         "mount and network namespaces")


def kernel_settings(root: Path) -> list[KernelSetting]:
    return [ptrace_setting(root), userns_setting(root)]
