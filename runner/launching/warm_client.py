"""The runner's side of the warm runner (runner/warm.py): start a process by forking it from the fork server.

`WarmLauncher(socket).launch(...)` gives a handle with the part of Popen's interface runner/launching/process.py uses,
plus `exit_fd`, which turns readable once the child has ended (the server's `exit` message), in place of a pidfd. The
child's secret variables (POPCORN_SEED) travel in a pipe that only the child reads, never in the request.
"""

from __future__ import annotations

import array
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

SECRET_VARIABLES = ("POPCORN_SEED",)
KILLED = -9  # what a child lost with its server (no exit message) is recorded as


class WarmUnavailable(OSError):
    """The fork server cannot be reached; the caller starts the process cold instead."""


class WarmProcess:
    def __init__(self, conn: socket.socket, pid: int) -> None:
        self.conn, self.pid = conn, pid
        self.returncode: int | None = None
        self.exit_fd = conn.fileno()

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.conn.settimeout(timeout)
            try:
                message = self.conn.recv(4096)
            except TimeoutError:
                raise
            except OSError:
                message = b""
            self.returncode = int(json.loads(message)["exit"]) if message else KILLED
        return self.returncode

    def release(self) -> None:
        """Let the server reap the child: only after this may its pid (and process group id) be reused."""
        self.conn.close()


class WarmLauncher:
    def __init__(self, socket_path: str | Path) -> None:
        self.socket_path = str(socket_path)

    def available(self) -> bool:
        return os.path.exists(self.socket_path)

    def launch(self, argv: list[str], *, cwd: str, env: dict[str, str], confine: dict | None,
               pass_fds: tuple[int, ...], stdout: int, stderr: int, seed_fd_variable: str | None = None) -> WarmProcess:
        """Fork `argv` from the server. A Python script given as `[sys.executable, script, ...]` runs in the fork
        itself (runpy); anything else is exec'd there after the same confinement.

        A seed (POPCORN_SEED) must never sit in the memory of a process that later forks the worker running user
        code. So a Python harness that takes its seed from a pipe named by `seed_fd_variable` gets that pipe,
        unread, and no POPCORN_SEED; any other program with a seed is exec'd (a fresh image) with POPCORN_SEED in
        its environment, exactly as a cold start gives it."""
        python = len(argv) >= 2 and argv[0] == sys.executable and argv[1].endswith(".py")
        public = {k: v for k, v in env.items() if k not in SECRET_VARIABLES}
        secret = {k: v for k, v in env.items() if k in SECRET_VARIABLES}
        fds = [stdout, stderr, *pass_fds]
        roles: dict = {"stdout": 0, "stderr": 1, "pass": [[fd, 2 + i] for i, fd in enumerate(pass_fds)]}
        secret_read = None
        if secret:
            by_pipe = python and seed_fd_variable is not None and set(secret) == {"POPCORN_SEED"}
            secret_read, secret_write = os.pipe()
            try:
                os.write(secret_write, (secret["POPCORN_SEED"] if by_pipe else json.dumps(secret)).encode())
            finally:
                os.close(secret_write)
            if by_pipe:
                roles["seed_pipe"] = [len(fds), seed_fd_variable]
            else:
                roles["secret"] = len(fds)
                python = False  # exec'd: the variables reach a fresh image only
            fds.append(secret_read)
        request = {"argv": argv, "cwd": cwd, "env": public, "confine": confine, "python": python, "fds": roles}
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            try:
                conn.connect(self.socket_path)
                conn.sendmsg([json.dumps(request).encode()],
                           [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
                answer = conn.recv(4096)
            except OSError as exc:
                raise WarmUnavailable(f"warm runner at {self.socket_path}: {exc}") from exc
            if not answer:
                raise WarmUnavailable(f"warm runner at {self.socket_path} refused the request")
            pid = int(json.loads(answer)["pid"])
        except BaseException:
            conn.close()
            raise
        finally:
            if secret_read is not None:
                os.close(secret_read)
        return WarmProcess(conn, pid)


def fork_runner(socket_path: str | Path, arguments: list[str], log_fd: int, timeout: float = 10) -> int:
    """Fork `python -m runner ARGUMENTS` from the warm runner at `socket_path`, its output going to `log_fd`;
    the runner's pid. Raises WarmUnavailable when the server cannot do it (start the runner cold then)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(str(socket_path))
            conn.sendmsg([json.dumps({"runner": arguments}).encode()],
                       [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [log_fd]))])
            answer = conn.recv(4096)
        except OSError as exc:
            raise WarmUnavailable(f"warm runner at {socket_path}: {exc}") from exc
    if not answer:
        raise WarmUnavailable(f"warm runner at {socket_path} refused to fork a runner")
    return int(json.loads(answer)["pid"])


def start_warm_runner(directory: Path, timeout: float = 120) -> tuple[Path, subprocess.Popen]:
    """Start a warm runner with its socket in `directory` (made private) and wait until it accepts; for entry points
    that serve runs themselves (the runner image, Modal's containers). The local backend starts its own."""
    os.chmod(directory, 0o700)
    path = Path(directory) / "warm.sock"
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH",
                                                          "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES")}
    server = subprocess.Popen([sys.executable, "-m", "runner.warm", str(path)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.poll() is None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as probe:
            try:
                probe.connect(str(path))
                return path, server
            except OSError:
                time.sleep(0.05)
    server.kill()
    server.wait()
    raise WarmUnavailable(f"the warm runner did not start in {timeout:.0f} s")
