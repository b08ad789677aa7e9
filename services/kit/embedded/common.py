"""Helpers shared by the embedded servers."""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

LOG_TAIL_LINES = 40


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS picks it; another process could still take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _run_sync(make_coroutine: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from sync code, even when the calling thread already runs a loop.

    A private thread with its own loop avoids both "asyncio.run() cannot be called from a running event loop"
    and blocking someone else's loop with nested run_until_complete.
    """

    async def main() -> T:
        return await make_coroutine()

    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kb-embedded") as pool:
        return pool.submit(asyncio.run, main()).result()


def _log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log written)"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


