"""The scorer's cost per judged submission as its users' histories grow: 10 against 1,000 scores per user.

A fresh stack (embedded NATS and Postgres, the scorer as a subprocess, as `kernelbot up` runs it) judges a history
of U users with H ranked submissions each, published as the producers publish them (accepted, then the public run and
its secret twin completed: bench/ranked_events.py). Then M more submissions are judged, published at a steady rate,
half of them a new best for their user, and the CPU the scorer and Postgres (server and backends) used meanwhile is
divided by M (their idle rate, measured just before, is shown beside it). The goal of
issue #25: from 10 to 1,000 scores per user, the cost per judged submission stays within 20 %.

    .venv/bin/python bench/scorer_history.py --histories 10,1000 --users 5 --measured 400
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from freshness import cpu_seconds, scorer_idle  # noqa: E402
from ranked_events import T0, submission_events, users  # noqa: E402

from schemas.envelope import Event  # noqa: E402
from schemas.events import RunCompleted, SubmissionAccepted  # noqa: E402
from schemas.streams import EVENTS  # noqa: E402
from services.kit.bus import MSG_ID_HEADER, declare_streams, encode, make_broker  # noqa: E402
from services.kit.db import apply_migrations  # noqa: E402
from services.kit.embedded import create_database, start_nats, start_postgres  # noqa: E402
from tests.support.platform import Platform  # noqa: E402

BOARD, GPU = "bench", "H100"
FILL_CHUNK = 100
IDLE_S = 3.0  # the scorer's consumers poll when idle: that rate is measured first, and shown
GROWTH_GOAL = 0.20  # at most this much more CPU per judged submission at the longest history than at the shortest


def history_events(people, first_id: int, per_user: int, bests: dict[str, float], rng) -> list[list[Event]]:
    """`per_user` submissions for each user, interleaved: the scorer's inputs only (it needs no ledger)."""
    made = []
    for _ in range(per_user):
        for person in people:
            best = bests.get(person.user_id, 50_000.0)
            # half of them a new best for their user, the others somewhat worse than it
            mean = best * (0.999 if rng.random() < 0.5 else rng.uniform(1.01, 1.5))
            bests[person.user_id] = min(best, mean)
            submission_id = first_id + len(made)
            at = T0 + timedelta(seconds=submission_id)
            made.append([e for e in submission_events(submission_id, BOARD, GPU, person, mean, at, secret=True)
                         if isinstance(e, SubmissionAccepted | RunCompleted)])
    return made


async def publish(nats_url: str, submissions: list[list[Event]], rate: float | None) -> None:
    """At `rate` submissions per second, or (None) as fast as the stream takes them."""
    import nats  # noqa: PLC0415 - as in bench/read.py: nats-py is only needed once the stack runs

    client = await nats.connect(nats_url)
    try:
        js = client.jetstream(publish_async_max_pending=2000)
        started = time.monotonic()
        for n, events in enumerate(submissions):
            for event in events:
                await js.publish_async(event.subject, encode(event), stream=EVENTS.name,
                                       headers={MSG_ID_HEADER: event.message_id})
            if rate is not None:
                await asyncio.sleep(max(0.0, started + (n + 1) / rate - time.monotonic()))
        await asyncio.wait_for(js.publish_async_completed(), 300)
    finally:
        await client.close()


async def streams(nats_url: str) -> None:
    """Declared as the services declare them: no gateway or ledger runs here to do it (nor to take CPU)."""
    broker = make_broker(nats_url)
    await broker.connect()
    try:
        await declare_streams(broker)
    finally:
        await broker.stop()


async def judged(database_url: str, count: int, limit_s: float) -> None:
    conn = await asyncpg.connect(database_url)
    started = time.monotonic()
    try:
        while time.monotonic() - started < limit_s:
            if await conn.fetchval("SELECT count(*) FROM scorer_submissions WHERE finished") >= count:
                return
            await asyncio.sleep(0.2)  # polling Postgres: the scorer announces nothing the bench could wait on
        raise TimeoutError(f"the scorer did not judge {count} submissions within {limit_s} s")
    finally:
        await conn.close()


def measure(history: int, people_count: int, measured: int, rate: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="kb-scorer-") as tmp:
        work = Path(tmp)
        nats_server, pg = start_nats(work / "nats"), start_postgres(work / "pg")
        database_url = create_database(pg.url, "bench")
        apply_migrations(database_url)
        platform = Platform(nats_server.url, database_url, work)
        try:
            asyncio.run(streams(nats_server.url))
            platform.start("scorer")
            people, bests, rng = users(people_count), {}, random.Random(25)
            started = time.monotonic()
            fill = history_events(people, 1, history, bests, rng)
            for chunk in range(0, len(fill), FILL_CHUNK):  # a backlog of thousands would be redelivered meanwhile
                asyncio.run(publish(nats_server.url, fill[chunk:chunk + FILL_CHUNK], None))
                asyncio.run(judged(database_url, min(len(fill), chunk + FILL_CHUNK), 3600))
            asyncio.run(scorer_idle(nats_server.url, 600))
            print(f"history {history}/user: {len(fill)} submissions by {people_count} users judged in "
                  f"{time.monotonic() - started:.1f} s", flush=True)
            pids = {"scorer": platform.children["scorer"].pid, "postgres": pg.pid}
            before = cpu_seconds(pids)
            time.sleep(IDLE_S)
            idle = {name: (spent - before[name]) / IDLE_S for name, spent in cpu_seconds(pids).items()}
            more = history_events(people, 1 + len(fill), max(1, measured // people_count), bests, rng)
            before, started = cpu_seconds(pids), time.monotonic()
            asyncio.run(publish(nats_server.url, more, rate))
            asyncio.run(judged(database_url, len(fill) + len(more), 600))
            wall = time.monotonic() - started
            used = {name: spent - before[name] for name, spent in cpu_seconds(pids).items()}
            per = {name: spent / len(more) * 1e3 for name, spent in used.items()}
            print(f"history {history}/user: {len(more)} more judged at {rate:g}/s in {wall:.1f} s; CPU per judged "
                  f"submission: scorer {per['scorer']:.2f} ms, postgres {per['postgres']:.2f} ms, both "
                  f"{sum(per.values()):.2f} ms (idle before: {idle['scorer']:.3f} s/s scorer, "
                  f"{idle['postgres']:.3f} s/s postgres)", flush=True)
            return per
        finally:
            platform.stop()
            nats_server.stop()
            pg.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--histories", default="10,1000", help="scores per user, one stack each")
    parser.add_argument("--users", type=int, default=5)
    parser.add_argument("--measured", type=int, default=400, help="submissions judged in the measured phase")
    parser.add_argument("--rate", type=float, default=50.0, help="submissions per second in the measured phase")
    args = parser.parse_args()
    results = {h: measure(h, args.users, args.measured, args.rate) for h in (int(x) for x in args.histories.split(","))}
    shortest, longest = results[min(results)], results[max(results)]
    growth = sum(longest.values()) / sum(shortest.values()) - 1
    print(f"goal scorer CPU per judged submission from {min(results)} to {max(results)} scores/user within "
          f"{GROWTH_GOAL:.0%}: {sum(shortest.values()):.2f} ms -> {sum(longest.values()):.2f} ms ({growth:+.0%}): "
          f"{'met' if growth <= GROWTH_GOAL else 'NOT MET'}")


if __name__ == "__main__":
    main()
