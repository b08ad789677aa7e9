"""A real warm runner (runner/warm.py) for tests: started as the local backend starts it, stopped afterwards."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from runner.launching.warm_client import WarmLauncher


def wait_ready(path: Path, server: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the warm runner exited with {server.returncode}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as probe:
            try:
                probe.connect(str(path))
                return  # a connection without a request: the server just drops it
            except OSError:
                time.sleep(0.05)
    raise RuntimeError("the warm runner did not become ready")


@contextlib.contextmanager
def warm_runner() -> Iterator[tuple[WarmLauncher, subprocess.Popen]]:
    directory = Path(tempfile.mkdtemp(prefix="kb-warm-test-"))
    os.chmod(directory, 0o700)
    path = directory / "warm.sock"
    server = subprocess.Popen([sys.executable, "-m", "runner.warm", str(path)], stdin=subprocess.DEVNULL)
    try:
        wait_ready(path, server)
        yield WarmLauncher(path), server
    finally:
        server.terminate()
        server.wait(30)
        path.unlink(missing_ok=True)
        directory.rmdir()
