"""`kernelbot host-check` reports the kernel settings the run sandbox stands on: Yama's ptrace restriction (whether
a process may read the memory of another of its uid) and user-namespace support (whether bwrap can build a run's
sandbox), each on an INFO line with what it means, and in the JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from runner.confinement.sandbox import sandbox_level
from services.cli.host_kernel import kernel_settings
from tests.support.fakes.host import FakeHost

KERNELBOT = Path(sys.executable).with_name("kernelbot")


def kernel(host: FakeHost, **settings: str) -> None:
    """Write /proc/sys values below the host's root: `kernel__yama__ptrace_scope="1"` is kernel/yama/ptrace_scope."""
    for name, value in settings.items():
        path = host.root / "proc" / "sys" / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")


def host_check(host: FakeHost, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(KERNELBOT), "host-check", "--root", str(host.root), *extra], env=host.env(),
                          capture_output=True, text=True, timeout=120, check=False)


def info(done: subprocess.CompletedProcess, name: str) -> str:
    [line] = [line for line in done.stdout.splitlines() if line.split()[:3] == ["INFO", "host", name]]
    return line


def test_a_kernel_without_ptrace_restriction_is_named_and_what_protects_the_supervisor_is_said(tmp_path):
    host = FakeHost(tmp_path)
    kernel(host, kernel__yama__ptrace_scope="0", user__max_user_namespaces="63229")
    done = host_check(host)
    ptrace = info(done, "ptrace")
    assert ptrace.startswith("INFO host   ptrace     kernel.yama.ptrace_scope=0: classic")
    assert "/proc/PID/mem" in ptrace and "non-dumpable" in ptrace and "seccomp" in ptrace
    userns = info(done, "userns")
    assert userns.startswith("INFO host   userns     user.max_user_namespaces=63229: ") and "allowed" in userns
    report = json.loads(host_check(host, "--json").stdout)
    assert report["kernel"]["ptrace"]["value"] == "kernel.yama.ptrace_scope=0"
    assert report["kernel"]["userns"] == {"value": "user.max_user_namespaces=63229", "allows_sandbox": True,
                                          "meaning": userns.split(": ", 1)[1]}


def test_a_restricted_ptrace_and_disabled_user_namespaces_are_reported_as_such(tmp_path):
    host = FakeHost(tmp_path)
    kernel(host, kernel__yama__ptrace_scope="1", user__max_user_namespaces="63229",
           kernel__apparmor_restrict_unprivileged_userns="1")
    done = host_check(host)
    assert "ptrace_scope=1: restricted: only a process's ancestors" in info(done, "ptrace")
    userns = info(done, "userns")
    assert "kernel.apparmor_restrict_unprivileged_userns=1: unprivileged user namespaces are disabled" in userns
    assert "cannot build the run sandbox" in userns
    report = json.loads(host_check(host, "--json").stdout)
    assert report["kernel"]["userns"]["allows_sandbox"] is False
    kernel(host, user__max_user_namespaces="0", kernel__apparmor_restrict_unprivileged_userns="0")
    assert "user.max_user_namespaces=0: unprivileged user namespaces are disabled" in info(host_check(host), "userns")


def test_a_kernel_without_yama_or_user_namespaces_says_so(tmp_path):
    host = FakeHost(tmp_path)
    done = host_check(host)
    assert "no kernel.yama.ptrace_scope: this kernel has no Yama" in info(done, "ptrace")
    assert "no user.max_user_namespaces: this kernel has no user namespaces" in info(done, "userns")


def test_on_this_machine_the_values_are_the_running_kernels():
    ptrace, userns = kernel_settings(Path("/"))
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    expected = f"kernel.yama.ptrace_scope={scope.read_text().strip()}" if scope.exists() else \
        "no kernel.yama.ptrace_scope"
    assert ptrace.value == expected
    if userns.allows_sandbox:
        limit = Path("/proc/sys/user/max_user_namespaces").read_text().strip()
        assert userns.value == f"user.max_user_namespaces={limit}"
    else:  # never said where this host did build the sandbox
        assert sandbox_level()[0] != "full", userns
