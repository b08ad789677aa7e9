"""What a board's web page shows for one GPU, for whoever may see it: one home for the page's route and for its fast
path in front of the application (services/gateway/fastpaths/board_pages.py), which answers people who are not signed
in. Both read the board with its standings' version first (board_reads.board_page), so the page is never older than
a ranking its reader has seen.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg
from markupsafe import Markup

from services.core.presentation import views
from services.core.readmodel import board_reads, queue_reads
from services.gateway.fastpaths.ranking_bodies import INTERVALS
from services.gateway.fastpaths.standings_cache import StandingsCache
from services.gateway.web import pages_repository, render
from services.gateway.web.charts import Attempt, best_over_time
from services.gateway.web.ranking_rows import ranking_rows, shown

RANKING_ROWS = 500
PLOT_POINTS = 5000


async def shown_gpu(pool: asyncpg.Pool, board, gpu: str | None) -> tuple[str, int]:
    """The GPU the page shows (the one asked for, else the board's first) and its standings' version; `board` is a
    board_reads.board_page row, read with `gpu`."""
    if gpu:
        return gpu, board["standing_version"]
    gpus = sorted(board["gpus"])
    if not gpus:
        return "", 0
    return gpus[0], await board_reads.standing_version(pool, board["id"], gpus[0])


async def context(pool: asyncpg.Pool, cache: StandingsCache, board, gpu: str, version: int) -> dict:
    """The template's values (leaderboard.html) but the viewer's, for `board` on `gpu` at standings `version` or
    later."""
    ranking_by = board["ranking_by"]
    variant = ("page", ranking_by)  # intervals follow the board's rule, which can change without a new standing
    # the queue beside the standings, not after them: each wait of a busy gateway's loop costs a turn of all its
    # connections, and a live board's page is awaited by everyone refreshing it
    cached, queue_rows = await asyncio.gather(
        cache.fetch(board["id"], gpu, version, variant, lambda: _standing_view(pool, board, gpu)),
        queue_reads.queue(pool, gpu))
    table, attempts, plots = cached.value
    now = datetime.now(UTC)
    plot = plots.get(_minute(now))
    if plot is None:  # the standings' version outlived the minute it was drawn in
        plot = await asyncio.to_thread(best_over_time, attempts, now)
        plots.clear()
        plots[_minute(now)] = plot
    queue = views.runner_queue(gpu, queue_rows)
    return {"board": board, "gpu": gpu, "gpus": sorted(board["gpus"]), "ranked": bool(attempts), "table": table,
            "ranking_by": ranking_by, "deadline": shown(board["deadline"]), "ended": board["deadline"] < now,
            "plot": plot, "queue": queue_text(queue)}


def _minute(moment: datetime) -> datetime:
    """The plot ends now, and its label shows the minute: it is drawn once a minute per version of the standings."""
    return moment.replace(second=0, microsecond=0)


async def _standing_view(pool: asyncpg.Pool, board, gpu: str) -> tuple[Markup, list[Attempt], dict]:
    """What the page shows of the standings: the ranking table with each entry's interval, the points of the plot
    and the plot drawn from them, by the minute it was drawn in."""
    rows, plotted = await asyncio.gather(pages_repository.ranking(pool, board["id"], gpu, RANKING_ROWS, INTERVALS.knows),
                                         pages_repository.attempts(pool, board["id"], gpu, PLOT_POINTS))
    attempts = [Attempt(r["submitted_at"], r["score"], r["user_name"]) for r in plotted]
    # off the event loop, table and plot in one hand-over: a live board's page is drawn again at every move, and the
    # rankings' answers must not wait for a whole table (Python hands the loop back every few milliseconds)
    table, plot, now = await asyncio.to_thread(_drawn, rows, board["ranking_by"], attempts)
    return table, attempts, {_minute(now): plot}


def _drawn(rows, ranking_by: str, attempts: list[Attempt]) -> tuple[Markup, Markup, datetime]:
    now = datetime.now(UTC)
    table = Markup(render("ranking_table.html", rows=ranking_rows(rows, INTERVALS.noise(rows, ranking_by))))
    return table, best_over_time(attempts, now), now


def queue_text(queue: dict) -> str:
    """What the runner queue means to a person: how busy the GPU is, and how long a wait to expect."""
    if queue.get("queued_jobs") is None:
        return ""
    text = f"{queue['queued_jobs']} waiting, {queue['running_jobs']} running"
    if queue.get("position"):
        text = f"position {queue['position']} in the queue ({text})"
    wait = queue.get("estimated_wait_s")
    if wait is not None and wait <= 0:  # nothing ahead and nothing running: no estimate to make
        text += "; starts now" if queue.get("position") else "; a run submitted now starts at once"
    elif wait is not None:
        text += f"; estimated start in about {max(1, round(wait / 60))} min"
    return text
