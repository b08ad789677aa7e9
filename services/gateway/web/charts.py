"""The plot of a leaderboard's best score over time, as inline SVG built on the server. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from markupsafe import Markup, escape

from services.gateway.web.stats import format_seconds

WIDTH, HEIGHT = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 80, 20, 16, 40
KEPT_LABELS = 50_000  # a few boards' plotted attempts


@dataclass(frozen=True)
class Attempt:
    when: datetime
    score: float
    user_name: str


def records(attempts: Sequence[Attempt]) -> list[Attempt]:
    """The attempts that improved the best score, in time order: the steps of the curve."""
    best: list[Attempt] = []
    for attempt in sorted(attempts, key=lambda a: a.when):
        if not best or attempt.score < best[-1].score:
            best.append(attempt)
    return best


def _scale(low: float, high: float, out_low: float, out_high: float):
    span = (high - low) or 1.0
    return lambda value: out_low + (value - low) / span * (out_high - out_low)


def best_over_time(attempts: Sequence[Attempt], now: datetime) -> Markup:
    """Every ranked attempt as a dot, the best score so far as a step line; empty Markup without attempts."""
    if not attempts:
        return Markup("")
    steps = records(attempts)
    start = min(a.when for a in attempts).timestamp()
    end = max(now.timestamp(), start + 1)
    low, high = min(a.score for a in attempts), max(a.score for a in attempts)
    pad = (high - low) * 0.08 or abs(high) * 0.1 or 1e-9
    x = _scale(start, end, LEFT, WIDTH - RIGHT)
    y = _scale(low - pad, high + pad, HEIGHT - BOTTOM, TOP)

    path = [f"M{x(steps[0].when.timestamp()):.1f},{y(steps[0].score):.1f}"]
    for step in steps[1:]:
        path.append(f"H{x(step.when.timestamp()):.1f}V{y(step.score):.1f}")
    path.append(f"H{x(end):.1f}")

    parts = [
        (f'<svg class="plot" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
         'xmlns="http://www.w3.org/2000/svg"><title>Best score over time</title>'),
        f'<line class="axis" x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}"/>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}"/>',
        f'<text class="tick" x="{LEFT - 6}" y="{y(high):.1f}" text-anchor="end">{escape(format_seconds(high))}</text>',
        f'<text class="tick" x="{LEFT - 6}" y="{y(low):.1f}" text-anchor="end">{escape(format_seconds(low))}</text>',
        f'<text class="tick" x="{LEFT}" y="{HEIGHT - 12}">{escape(_when(min(a.when for a in attempts)))}</text>',
        f'<text class="tick" x="{WIDTH - RIGHT}" y="{HEIGHT - 12}" text-anchor="end">{escape(_when(now))}</text>',
        f'<path class="best" d="{"".join(path)}"/>',
    ]
    record_ids = {id(step) for step in steps}
    for attempt in sorted(attempts, key=lambda a: a.when):
        kind = "record" if id(attempt) in record_ids else "attempt"
        parts.append(f'<circle class="{kind}" cx="{x(attempt.when.timestamp()):.1f}" cy="{y(attempt.score):.1f}" '
                     f'r="{4 if kind == "record" else 3}"><title>{_label(attempt)}</title></circle>')
    parts.append("</svg>")
    return Markup("".join(parts))


@lru_cache(maxsize=KEPT_LABELS)
def _label(attempt: Attempt) -> str:
    """An attempt's tooltip, escaped: the plot is drawn again at every change of the standings, its attempts are
    not (formatting the labels was half of a redraw)."""
    return escape(f"{attempt.user_name}: {format_seconds(attempt.score)} at {_when(attempt.when)}")


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")

