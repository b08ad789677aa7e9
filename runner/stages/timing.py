"""Wall-clock stamps of a run's phases (EvalResult.timing, FullResult.timing), for finding where a run's time goes.

Durations are taken with time.monotonic() and turned into ISO-8601 UTC stamps only when reported, so a clock step
during a run does not distort the phases against each other.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime


def iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).isoformat()


def iso_from_monotonic(moment: float) -> str:
    return iso(time.time() - (time.monotonic() - moment))


def process_started_iso(pid: int | None = None) -> str:
    """When process `pid` (default: this one) was started (or forked), from /proc (10 ms resolution; counted
    on the boot-time clock, since /proc's whole-second boot time would be up to a second off); empty if unknown."""
    try:
        with open(f"/proc/{pid or os.getpid()}/stat", "rb") as handle:
            start_ticks = int(handle.read().rsplit(b")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return ""
    return iso(time.time() - age)


def stage_timing(outcome) -> dict[str, str]:
    """The phases of one harness process: started, first and last result line, ended; and `start`: `warm` when it
    was forked from a warm runner, `cold` when started as a new interpreter. A later stage of a chain
    (runner/launching/chain.py) runs in the process of the first: its `process_started` is when the runner sent it, its
    `process_ended` when the harness answered for it, and it is marked `chained: true`."""
    stamps = {"process_started": outcome.started_at, "harness_started": outcome.result.first_at,
              "harness_finished": outcome.result.last_at, "process_ended": outcome.started_at + outcome.duration}
    timing = {name: iso_from_monotonic(moment) for name, moment in stamps.items() if moment is not None}
    return {**timing, "start": "warm" if outcome.forked else "cold",
            **({"chained": "true"} if getattr(outcome, "chained", False) else {})}
