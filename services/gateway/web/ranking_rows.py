"""The rows of the web page's ranking table, built once per entry rather than once per version of the standings.

While a competition is live the standings move many times a second and each move renders the page's table again
(up to RANKING_ROWS entries). Only the rank column and the tie mark follow from the others' places; an entry's
other cells change only when its own score does. So those cells are kept per entry (an LRU over their inputs), and
a new version costs a string join per row instead of a template loop over every cell. Autoescaped as the templates
are: every value a user chose is shown as text.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

from markupsafe import Markup, escape

from services.core.rules.noise import Interval, Noise
from services.gateway.web.stats import format_seconds

KEPT_ROWS = 20_000  # entries whose cells are kept: a few boards' full tables
TIE = ' <span class="tie" title="95% intervals overlap with the entry above">≈ tie</span>'


def shown(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "—"


@lru_cache(maxsize=KEPT_ROWS)
def _cells(user_name: str, score: float, interval: Interval | None, submitted: datetime | None,
           file_name: str) -> str:
    shown_interval = f"{format_seconds(interval.low)} – {format_seconds(interval.high)}" if interval else "—"
    return (f'<td class="user">{escape(user_name)}</td><td class="num score">{escape(format_seconds(score))}</td>'
            f'<td class="num interval">{escape(shown_interval)}</td>'
            f'<td class="num time">{escape(shown(submitted))}</td><td class="file">{escape(file_name)}</td>')


def ranking_rows(rows, noise: list[Noise]) -> Markup:
    """The table's body rows, in rank order, from the ranking's rows and each entry's noise."""
    return Markup("\n".join(
        f'<tr class="entry"><td class="num rank">{int(row["rank"])}{TIE if n.tied_within_noise else ""}</td>'
        f'{_cells(row["user_name"], row["score"], n.interval, row["submitted_at"], row["file_name"])}</tr>'
        for row, n in zip(rows, noise, strict=True)))
