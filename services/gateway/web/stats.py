"""How the web pages write a duration (the intervals and ties they show: services/core/rules/noise.py). Pure."""

from __future__ import annotations

import math


def format_seconds(value: float | None) -> str:
    """A duration in the unit that reads best: 12.3 µs, 4.56 ms, 1.23 s."""
    if value is None or not math.isfinite(value):
        return "—"
    magnitude = abs(value)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if magnitude >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{value / 1e-9:.4g} ns"
