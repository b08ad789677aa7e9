"""N2: a harness supervisor's memory, seen from the worker it starts, inside the real run sandbox.

A supervisor holds the seed and the verdict; its worker runs user code under the same uid in the same sandbox. The
seccomp filter denies ptrace and process_vm_readv/writev, but `/proc/<ppid>/mem` is an open() of a path, which a
seccomp filter cannot tell from any other. What stops it is the kernel's ptrace access check on that file: a
parent that made itself non-dumpable is closed to a process of the same uid without CAP_SYS_PTRACE (the sandbox
drops every capability), and so are its `/proc/<ppid>/environ` and `/proc/<ppid>/fd`. Yama's ptrace_scope >= 1
would refuse the dumpable case too, but many hosts (Fedora, RHEL, many Slurm clusters) run without it.

The stand-in has the supervisor's shape: it takes a secret at run time, then forks and execs its worker, which
tries to read and rewrite the secret through `/proc/<ppid>/mem`, to open the parent's environ and fd directory, and
to take the parent's stdout with pidfd_getfd (guarded by the same check, and denied by the filter as well).
It is told the secret's address, which a real attacker would find in `/proc/<ppid>/maps` (as open as `mem`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runner.confinement.sandbox import RunSandbox, SandboxPolicy, sandbox_level

YAMA = Path("/proc/sys/kernel/yama/ptrace_scope")
STANDIN = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif
#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438
#endif

static char secret[64];

static void try_open(const char* what, const char* path, int flags) {
    int fd = open(path, flags);
    printf("%s: %s\n", what, fd >= 0 ? "open" : strerror(errno));
    if (fd >= 0) close(fd);
}

static int worker(unsigned long address) {
    char path[64], seen[64] = "";
    pid_t parent = getppid();
    snprintf(path, sizeof path, "/proc/%d/mem", parent);
    int mem = open(path, O_RDWR);
    if (mem < 0) {
        printf("mem: %s\n", strerror(errno));
    } else {
        ssize_t got = pread(mem, seen, sizeof seen - 1, (off_t)address);
        printf("mem-read: %s\n", got > 0 ? seen : strerror(errno));
        ssize_t put = pwrite(mem, "forged-by-the-worker", 21, (off_t)address);
        printf("mem-write: %s\n", put == 21 ? "written" : strerror(errno));
        close(mem);
    }
    snprintf(path, sizeof path, "/proc/%d/environ", parent);
    try_open("environ", path, O_RDONLY);
    snprintf(path, sizeof path, "/proc/%d/fd", parent);
    try_open("fd", path, O_RDONLY | O_DIRECTORY);
    int pidfd = (int)syscall(__NR_pidfd_open, parent, 0);
    int stolen = pidfd >= 0 ? (int)syscall(__NR_pidfd_getfd, pidfd, 1, 0) : -1;  /* the parent's stdout */
    printf("pidfd_getfd: %s\n", stolen >= 0 ? "stolen" : strerror(errno));
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 3 && strcmp(argv[1], "worker") == 0) return worker(strtoul(argv[2], NULL, 16));
    if (argc != 2) return 2;
    if (strcmp(argv[1], "undumpable") == 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return 3;
    unsigned long long random = 0;
    FILE* source = fopen("/dev/urandom", "rb");
    if (!source || fread(&random, sizeof random, 1, source) != 1) return 4;
    fclose(source);
    snprintf(secret, sizeof secret, "seed-%llx", random);  /* known only at run time */
    printf("secret: %s\n", secret);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char address[32];
        snprintf(address, sizeof address, "%lx", (unsigned long)secret);
        execl("/proc/self/exe", argv[0], "worker", address, (char*)NULL);
        _exit(127);
    }
    waitpid(pid, NULL, 0);
    printf("parent-now: %s\n", secret);
    return 0;
}
"""


def yama_scope() -> int | None:
    try:
        return int(YAMA.read_text())
    except (OSError, ValueError):
        return None


@pytest.fixture(scope="module")
def standin(tmp_path_factory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    if sandbox_level()[0] != "full":
        pytest.skip(f"the full sandbox cannot be built here: {sandbox_level()[1]}")
    place = tmp_path_factory.mktemp("standin")
    (place / "standin.c").write_text(STANDIN)
    subprocess.run(["gcc", "-O1", "-o", str(place / "standin"), str(place / "standin.c")], check=True,
                   capture_output=True, timeout=60)
    return place / "standin"


def in_the_sandbox(standin: Path, mode: str) -> dict[str, str]:
    """The stand-in run as a run's process is: confined into a fresh full sandbox; its report as a dict."""
    with RunSandbox(SandboxPolicy(isolate=True)) as box:
        assert box.level == "full"
        binary = box.run_dir / "standin"
        shutil.copy(standin, binary)
        os.chmod(binary, 0o755)
        done = subprocess.run(box.wrap([str(binary), mode], 30), cwd=box.run_dir, env={"PATH": "/usr/bin:/bin"},
                              capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return dict(line.split(": ", 1) for line in done.stdout.splitlines())


@pytest.mark.skipif((yama_scope() or 0) >= 1, reason=f"Yama restricts ptrace here ({YAMA} = {yama_scope()}): "
                    "/proc/<ppid>/mem is refused even to a dumpable parent's child, so the attack cannot be shown")
def test_a_worker_reads_and_rewrites_a_dumpable_supervisor_inside_the_sandbox(standin):
    report = in_the_sandbox(standin, "dumpable")
    assert report["mem-read"] == report["secret"]  # the seed, read
    assert report["mem-write"] == "written" and report["parent-now"] == "forged-by-the-worker"  # the verdict, forged
    assert report["environ"] == report["fd"] == "open"
    # The same ptrace check guards pidfd_getfd, which would hand over the parent's pipes: the filter denies it.
    assert report["pidfd_getfd"] == "Operation not permitted"


def test_a_non_dumpable_supervisor_is_closed_to_its_worker_inside_the_sandbox(standin):
    report = in_the_sandbox(standin, "undumpable")
    assert report["mem"] == "Permission denied" and "mem-read" not in report
    assert report["parent-now"] == report["secret"]
    assert report["environ"] == report["fd"] == "Permission denied"
    assert report["pidfd_getfd"] == "Operation not permitted"
