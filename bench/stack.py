"""What the benchmarks that start a whole platform share: its NATS and Postgres, a fresh migrated database, the
machine's load average, and one definition of a percentile.

NATS and Postgres are started embedded under the work directory unless KB_NATS_URL / KB_DATABASE_URL name running
ones (then each benchmark gets its own database there). Not a benchmark itself; `python bench/<name>.py` imports it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from services.kit.db import apply_migrations
from services.kit.embedded import create_database, start_nats, start_postgres


@contextmanager
def servers(workdir: Path, database_prefix: str) -> Iterator[tuple[str, str]]:
    """(NATS URL, database URL) of a fresh migrated database; the servers started here stop on the way out."""
    started = []
    try:
        nats_url = os.environ.get("KB_NATS_URL")
        if not nats_url:
            started.append(start_nats(workdir / "nats"))
            nats_url = started[-1].url
        server_url = os.environ.get("KB_DATABASE_URL")
        if not server_url:
            started.append(start_postgres(workdir / "postgres"))
            server_url = started[-1].url
        database_url = create_database(server_url, f"{database_prefix}_{int(time.time())}")
        apply_migrations(database_url)
        yield nats_url, database_url
    finally:
        for server in reversed(started):
            server.stop()


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank percentile: the smallest value with at least p% of the values at or below it; NaN if none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


def load() -> str:
    """The 1, 5 and 15 minute load averages: the machine is shared, so every figure is printed beside them."""
    with open("/proc/loadavg") as handle:
        return " ".join(handle.read().split()[:3])
