"""Reads while a competition is live: rankings under a stream of new bests, and how soon a new #1 shows.

The stack and the history are bench/read.py's (embedded NATS and Postgres, the ledger and the gateway as
subprocesses, a board filled with N ranked submissions by U users through the real ledger). Then, in phases, new
ranked submissions are published at a steady rate (none, 5/s, 50/s), each a new best for its user and one in ten a
new #1, while `wrk` reads `GET /submissions/{board}/{gpu}?limit=20` at c=64. Each phase prints wrk's req/s, p50 and
p99, how long a new #1 took from the publish of its ScoreComputed (the bench's; with the scorer on, the scorer's
own, once it has judged the runs) to the ranking (and to the web page, and, with the
scorer on, to the LeaderboardRankChanged that Discord's podium follows), and the CPU each process used. By default
the scorer runs from the start (it judges the history as it is filled, as the issue's measurement had it) and the
phases run with it on, then again once it is stopped.

    apt-get install -y wrk
    .venv/bin/python bench/live.py --submissions 20000 --users 1000 --scorer on,off
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import httpx
import nats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from freshness import (  # noqa: E402
    SEEN_WITHIN_S,
    Watch,
    cpu_seconds,
    scorer_idle,
    watch_http,
    watch_podium,
    watch_projection,
    watch_scores,
)
from ranked_events import ranked_history, submission_events, users  # noqa: E402
from read import BOARD, GPU, PUBLISH_WINDOW, projected, wrk  # noqa: E402

from schemas.events import ScoreComputed, SubmissionFinished  # noqa: E402
from schemas.streams import EVENTS  # noqa: E402
from services.kit.bus import MSG_ID_HEADER, encode  # noqa: E402
from services.kit.db import apply_migrations  # noqa: E402
from services.kit.embedded import create_database, start_nats, start_postgres  # noqa: E402
from tests.support.platform import Platform, identity_board  # noqa: E402

RANKING = f"/submissions/{BOARD}/{GPU}?limit=20"
PAGE = f"/web/leaderboards/{BOARD}?gpu={GPU}"
FILL_CHUNK = 1000  # submissions published at once while the scorer runs
NEW_TOP_EVERY = 10  # one live submission in ten is a new #1
# The goals of issue #25: at 50/s with the scorer on, >= half the quiet req/s with p99 <= 20 ms; a new #1 seen within
# 100 ms p50 and 500 ms max.
P99_GOAL_MS, FRESH_P50_GOAL_MS, FRESH_MAX_GOAL_MS = 20.0, 100.0, 500.0


@dataclass
class Live:
    """Who holds which best, so each live submission is a new best for its user (and some a new #1)."""

    bests: dict[str, float]  # user id -> best score (seconds)
    people: dict[str, object]
    next_id: int
    rng: random.Random = field(default_factory=lambda: random.Random(25))
    made: int = 0

    def next(self) -> tuple[int, object, float, bool]:
        self.made += 1
        top = min(self.bests.values())
        new_top = self.made % NEW_TOP_EVERY == 0
        user_id = self.rng.choice([u for u in self.bests if new_top or self.bests[u] > top])
        score = top * 0.99 if new_top else self.bests[user_id] * 0.999
        self.bests[user_id] = score
        self.next_id += 1
        return self.next_id, self.people[user_id], score, new_top


async def publish_live(js, live: Live, rate: float, stop: asyncio.Event, watch: Watch, observers: list[str],
                       scorer: bool) -> int:
    """Publish new ranked submissions at `rate` per second until `stop`; how many. With the `scorer` on, only what
    comes before its judging (received, accepted, the runs' results): the clock of a new #1 starts at the scorer's
    ScoreComputed. Published by the bench too, its copy could reach the scorer's score consumer before the judging,
    which would then find the best already moved and announce nothing."""
    started, tasks = time.monotonic(), set()

    async def one() -> None:
        submission_id, person, score, new_top = live.next()
        events = submission_events(submission_id, BOARD, GPU, person, score * 1e9, datetime.now(UTC), secret=True)
        if scorer:  # its score and its end are the scorer's to publish, once it has judged the runs
            events = [e for e in events if not isinstance(e, ScoreComputed | SubmissionFinished)]
            if new_top:
                watch.await_score(submission_id)
        for event in events:
            watched = new_top and not scorer and event.subject == "evt.score.computed"
            if watched:
                watch.published(submission_id, time.monotonic(), observers)
            ack = await js.publish(event.subject, encode(event), headers={MSG_ID_HEADER: event.message_id},
                                   stream=EVENTS.name)
            if watched:
                watch.sequences[submission_id] = ack.seq

    sent = 0
    while not stop.is_set():
        task = asyncio.ensure_future(one())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        sent += 1
        await asyncio.sleep(max(0.0, started + sent / rate - time.monotonic()))
    await asyncio.gather(*tasks)
    return sent


async def publish_all(nats_url: str, batches: list[list]) -> None:
    client = await nats.connect(nats_url)
    try:
        js = client.jetstream(publish_async_max_pending=PUBLISH_WINDOW)
        for events in batches:
            for event in events:
                await js.publish_async(event.subject, encode(event), headers={MSG_ID_HEADER: event.message_id},
                                       stream=EVENTS.name)
        await asyncio.wait_for(js.publish_async_completed(), 120)
    finally:
        await client.close()


def fill(nats_url: str, database_url: str, submissions: int, people, scorer: bool) -> None:
    """The history, projected by the ledger; judged by the scorer as well when it runs, in chunks it can take (a
    backlog of thousands overflows its consumers, which then wait for redeliveries)."""
    asyncio.run(publish_all(nats_url, [[person] for person in people]))
    history = list(ranked_history(submissions, people, BOARD, GPU, secret=True))
    chunk = FILL_CHUNK if scorer else len(history)
    for first in range(0, len(history), chunk):
        asyncio.run(publish_all(nats_url, history[first:first + chunk]))
        if scorer:
            asyncio.run(scorer_caught_up(database_url, min(len(history), first + chunk), 900))
    total = len(people) + sum(len(events) for events in history) + 1  # and the board
    while asyncio.run(projected(database_url)) < total:
        time.sleep(0.5)


async def outbox_drained(database_url: str) -> None:
    """Until the scorer has published what its catch-up decided (its podium events would arrive late otherwise)."""
    conn = await asyncpg.connect(database_url)
    try:
        for _ in range(600):
            if not await conn.fetchval("SELECT count(*) FROM outbox"):
                break
            await asyncio.sleep(0.5)  # polling Postgres: the outbox announces nothing the bench could wait on
    finally:
        await conn.close()


async def phase(nats_url: str, database_url: str, url: str, live: Live, rate: float, seconds: int, scorer: bool,
                pids: dict[str, int], connections: int, page_every_s: float) -> dict:
    client = await nats.connect(nats_url)
    watch, stop, publishing_stop = Watch(), asyncio.Event(), asyncio.Event()
    observers = ["projected", "ranking", *(["page"] if page_every_s else []), *(["podium"] if scorer else [])]
    subscriptions = [await watch_podium(client, watch), await watch_scores(client, watch, observers)] if scorer else []
    listening = await watch_projection(database_url, watch)
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        workers = [asyncio.ensure_future(watch_http(http, "ranking", RANKING, watch, stop))]
        if page_every_s:
            workers.append(asyncio.ensure_future(watch_http(http, "page", PAGE, watch, stop, page_every_s)))
        publisher = (asyncio.ensure_future(publish_live(client.jetstream(), live, rate, publishing_stop, watch,
                                                          observers, scorer))
                     if rate else None)
        await asyncio.sleep(1.0 if rate else 0)  # the stream is flowing before wrk starts
        cpu_before = cpu_seconds(pids)
        if connections:
            rate_read, p50, p99, trouble = await asyncio.to_thread(wrk, url + RANKING, connections, seconds, {})
        else:  # freshness alone, with no load of reads
            rate_read, p50, p99, trouble = await asyncio.sleep(seconds, (0.0, 0.0, 0.0, ""))
        cpu = {name: used - cpu_before.get(name, 0.0) for name, used in cpu_seconds(pids).items()}
        publishing_stop.set()
        sent = await publisher if publisher else 0
        watch._check_drained()
        await watch.drained.wait()  # the last new #1s on their way (the watchers expire them after SEEN_WITHIN_S)
        stop.set()
        await asyncio.gather(*workers)
    for subscription in subscriptions:
        await subscription.unsubscribe()
    await client.close()
    await listening.close()
    if watch.unscored:
        trouble += f" ({watch.unscored} new #1s never scored within {SEEN_WITHIN_S:g} s)"
    return {"rate": rate_read, "p50": p50, "p99": p99, "trouble": trouble, "sent": sent, "cpu": cpu,
            "fresh": {name: sorted(values) for name, values in watch.seen.items() if values}}


def report(label: str, result: dict, seconds: int) -> str:
    parts = [f"{label}: {result['rate']:.0f} req/s p50 {result['p50']:.2f} ms p99 {result['p99']:.2f} ms"
             f"{result['trouble']}"]
    for name, values in result["fresh"].items():
        parts.append(f"new #1 -> {name}: p50 {statistics.median(values) * 1e3:.0f} ms max {max(values) * 1e3:.0f} ms "
                     f"({len(values)})")
    parts.append("CPU s/s: " + ", ".join(f"{n} {v / seconds:.2f}" for n, v in sorted(result["cpu"].items())))
    return "; ".join(parts)


async def standings_now(database_url: str) -> dict[str, float]:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch("SELECT user_id, score FROM standings")
        return {r["user_id"]: r["score"] for r in rows}
    finally:
        await conn.close()


async def scorer_caught_up(database_url: str, submissions: int, limit_s: float) -> float:
    conn = await asyncpg.connect(database_url)
    started = time.monotonic()
    try:
        while time.monotonic() - started < limit_s:
            if await conn.fetchval("SELECT count(*) FROM scorer_submissions WHERE finished") >= submissions:
                break
            await asyncio.sleep(0.5)  # polling Postgres: the scorer announces nothing the bench could wait on
        return time.monotonic() - started
    finally:
        await conn.close()


def goals(results: dict[tuple[bool, float], dict]) -> None:
    quiet, busy = results.get((True, 0.0)), results.get((True, 50.0))
    if quiet is None or busy is None:
        return
    met = busy["rate"] >= quiet["rate"] / 2 and busy["p99"] <= P99_GOAL_MS and not busy["trouble"]
    print(f"goal reads at 50/s, scorer on: >= {quiet['rate'] / 2:.0f} req/s (half of quiet) and p99 <= "
          f"{P99_GOAL_MS:g} ms: {busy['rate']:.0f} req/s, p99 {busy['p99']:.2f} ms: {'met' if met else 'NOT MET'}")
    for name, values in busy["fresh"].items():
        p50, most = statistics.median(values) * 1e3, max(values) * 1e3
        met = p50 <= FRESH_P50_GOAL_MS and most <= FRESH_MAX_GOAL_MS
        print(f"goal new #1 -> {name} at 50/s, scorer on: p50 <= {FRESH_P50_GOAL_MS:g} ms, max <= "
              f"{FRESH_MAX_GOAL_MS:g} ms: p50 {p50:.0f} ms, max {most:.0f} ms: {'met' if met else 'NOT MET'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=20_000)
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--seconds", type=int, default=10, help="duration of each wrk run")
    parser.add_argument("--rates", default="0,5,50", help="new ranked submissions per second, one phase each")
    parser.add_argument("--scorer", default="on,off", help="the scorer's states, in order; first on: it runs from the "
                        "start and judges the history as it is filled; off then on: it judges it all when started")
    # a page costs a render of its 500 rows per change it is read at: read as a person would refresh it, only faster
    parser.add_argument("--page-every", type=float, default=0.025, help="seconds between reads of the web page while "
                        "a new #1 is awaited there; 0: the page is not read")
    parser.add_argument("--connections", type=int, default=64, help="wrk's connections; 0: no reads but the "
                        "watchers' (how fresh a new #1 is on an idle gateway)")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: apt-get install -y wrk")

    with tempfile.TemporaryDirectory(prefix="kb-live-") as tmp:
        work = Path(tmp)
        nats_server, pg = start_nats(work / "nats"), start_postgres(work / "pg")
        database_url = create_database(pg.url, "bench")
        apply_migrations(database_url)
        platform = Platform(nats_server.url, database_url, work)
        try:
            platform.start("ledger", "gateway")
            platform.add_boards(identity_board(BOARD, [GPU]))
            people, states = users(args.users), args.scorer.split(",")
            if states[0] == "on":
                platform.start("scorer")
            started = time.monotonic()
            fill(nats_server.url, database_url, args.submissions, people, states[0] == "on")
            print(f"filled: {args.submissions} ranked submissions by {args.users} users in "
                  f"{time.monotonic() - started:.1f} s{', judged by the scorer' if states[0] == 'on' else ''}",
                  flush=True)
            live = Live(asyncio.run(standings_now(database_url)), {p.user_id: p for p in people}, args.submissions)
            results: dict[tuple[bool, float], dict] = {}
            for state in states:
                scorer = state == "on"
                if not scorer and "scorer" in platform.children:
                    stopping = platform.children.pop("scorer")
                    stopping.terminate()
                    stopping.wait()
                if scorer and "scorer" not in platform.children:
                    platform.start("scorer")
                    cpu_before = cpu_seconds({"scorer": platform.children["scorer"].pid, "postgres": pg.pid})
                    waited = asyncio.run(scorer_caught_up(database_url, live.next_id, 900))
                    asyncio.run(outbox_drained(database_url))
                    used = cpu_seconds({"scorer": platform.children["scorer"].pid, "postgres": pg.pid})
                    print(f"scorer judged the {live.next_id} submissions again in {waited:.1f} s (CPU: scorer "
                          f"{used['scorer'] - cpu_before['scorer']:.1f} s, postgres "
                          f"{used['postgres'] - cpu_before['postgres']:.1f} s)", flush=True)
                pids = {name: child.pid for name, child in platform.children.items()}
                pids.update(postgres=pg.pid, nats=nats_server.pid)
                for rate in (float(r) for r in args.rates.split(",")):
                    if scorer:  # a phase starts with nothing left of the fill's or the last phase's judging
                        asyncio.run(scorer_idle(nats_server.url, 900))
                    result = asyncio.run(phase(nats_server.url, database_url, platform.url, live, rate, args.seconds, scorer,
                                               pids, args.connections, args.page_every))
                    results[(scorer, rate)] = result
                    print(report(f"scorer {state}, {rate:g} new ranked/s ({result['sent']} sent)", result,
                                 args.seconds), flush=True)
            goals(results)
        finally:
            platform.stop()
            nats_server.stop()
            pg.stop()


if __name__ == "__main__":
    main()
