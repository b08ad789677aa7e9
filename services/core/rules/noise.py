"""When two ranked scores are the same within noise (docs/quickstart.md): each score's 95% interval, and whether it
overlaps the one ranked just above. Pure, but for RunIntervals' memory. The one rule behind every front end that
shows a ranking: the web page, the API's `tied_within_noise`, `kernelbot leaderboard show` and Discord's
`/leaderboard show`.

A score is `last`, `mean` or `geom` of the per-case benchmark means (services/scorer/scoring.py); each case reports
its mean and standard error in ns. The interval propagates those errors through the same aggregate (normal
approximation; the delta method on logarithms for the geometric mean).

`RunIntervals` keeps each ranked run's interval once told: a run's result never changes, and a live board's ranking
is rendered again at every move of its standings (parsing and aggregating every entry's result map again was the
largest part of such a render).
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Z95 = 1.959964


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


def _cases(result: Mapping[str, str]) -> list[tuple[float, float]] | None:
    try:
        count = int(result.get("benchmark-count", "0"))
        cases = [(float(result[f"benchmark.{i}.mean"]) / 1e9, float(result[f"benchmark.{i}.err"]) / 1e9)
                 for i in range(count)]
    except (KeyError, ValueError, TypeError):
        return None
    if not cases or any(not (math.isfinite(m) and math.isfinite(e)) or e < 0 for m, e in cases):
        return None
    return cases


def score_interval(result: Mapping[str, str] | None, ranking_by: str) -> Interval | None:
    """The 95% interval of the score computed from a leaderboard stage's result map; None when it cannot be told."""
    cases = _cases(result or {})
    if cases is None:
        return None
    n = len(cases)
    if ranking_by == "last":
        mean, err = cases[-1]
        return Interval(mean - Z95 * err, mean + Z95 * err)
    if ranking_by == "mean":
        mean = sum(m for m, _ in cases) / n
        err = math.sqrt(sum(e * e for _, e in cases)) / n
        return Interval(mean - Z95 * err, mean + Z95 * err)
    if any(m <= 0 for m, _ in cases):
        return None
    log_mean = sum(math.log(m) for m, _ in cases) / n
    log_err = math.sqrt(sum((e / m) ** 2 for m, e in cases)) / n
    return Interval(math.exp(log_mean - Z95 * log_err), math.exp(log_mean + Z95 * log_err))


def ties_with_above(intervals: Sequence[Interval | None]) -> list[bool]:
    """For each entry in rank order: does its interval overlap the one ranked just above it?"""
    flags = [False] * len(intervals)
    for i in range(1, len(intervals)):
        above, here = intervals[i - 1], intervals[i]
        flags[i] = above is not None and here is not None and here.low <= above.high
    return flags


@dataclass(frozen=True)
class Noise:
    """What a front end shows of one ranked entry's noise."""

    interval: Interval | None
    tied_within_noise: bool  # its interval overlaps the one of the entry ranked just above


def ranking_noise(intervals: Sequence[Interval | None]) -> list[Noise]:
    """The noise of each entry of a ranking, in rank order, from each entry's interval (None: unknown, never a
    tie)."""
    return [Noise(interval, tie) for interval, tie in zip(intervals, ties_with_above(intervals), strict=True)]


class RunIntervals:
    """Each run's interval by ranking rule, told from its leaderboard stage's result map (JSON text, as the ranking
    queries select it) the first time it is asked; the least recently asked are forgotten past `size`."""

    def __init__(self, size: int = 50_000) -> None:
        self._size = size
        self._kept: OrderedDict[tuple[str, str], Interval | None] = OrderedDict()
        self._lock = threading.Lock()  # the web page tells its table's intervals in a worker thread

    def interval(self, run_id: str | None, result_json: str | None, ranking_by: str) -> Interval | None:
        key = (run_id or "", ranking_by)
        with self._lock:
            if run_id and key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        interval = score_interval(json.loads(result_json) if result_json else None, ranking_by)
        if run_id and result_json:  # a result not there yet is not kept as unknown
            with self._lock:
                self._kept[key] = interval
                if len(self._kept) > self._size:
                    self._kept.popitem(last=False)
        return interval

    def knows(self, run_id: str, ranking_by: str) -> bool:
        """Whether the run's interval under that rule is kept: a reader need not read its result again."""
        with self._lock:
            return (run_id, ranking_by) in self._kept

    def noise(self, rows: Sequence[Mapping], ranking_by: str) -> list[Noise]:
        """ranking_noise of ranking rows carrying `run_id` and `stage_result` (JSON text), in rank order."""
        return ranking_noise([self.interval(row["run_id"], row["stage_result"], ranking_by) for row in rows])


TIE_MARK = "≈"
TIE_LEGEND = "≈: tied within noise with the entry above (their 95% intervals overlap)"
