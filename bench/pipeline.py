"""Platform overhead and throughput, measured on the real stack with a harness that does no work.

Every service runs as a subprocess (as `kernelbot up` runs them) against real NATS and Postgres; the dispatcher serves
GPU `null` with the null backend, so everything but the harness is the production path: HTTP submit, admission,
planning, the durable run queue, outbox publishing, scoring, ranking and projection.

Prints (a) the overhead per ranked submission from SubmissionAccepted to its score being visible in the read model,
p50 and p99, at a modest steady rate and under full load, and (b) sustained submissions per second, checking that
every submission finished once and was ranked.

    .venv/bin/python bench/pipeline.py --submissions 2000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.stack import load, percentile, servers  # noqa: E402
from problems import PROBLEMS_ROOT  # noqa: E402
from tests.support.platform import ADMIN_TOKEN, Platform, identity_board  # noqa: E402

BOARD = "bench"
CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()

LATENCY_SQL = """
SELECT a.correlation_id AS id, EXTRACT(EPOCH FROM (s.recorded_at - a.occurred_at)) * 1000 AS ms
FROM event_archive a JOIN event_archive s ON s.correlation_id = a.correlation_id AND s.event_type = 'ScoreComputed'
WHERE a.event_type = 'SubmissionAccepted' AND a.correlation_id = ANY($1::text[])
"""
SPAN_SQL = """
SELECT min(occurred_at) AS first, max(recorded_at) AS last, count(*) AS n FROM event_archive
WHERE event_type IN ('SubmissionReceived', 'SubmissionFinished') AND correlation_id = ANY($1::text[])
"""
FINISHED_SQL = """
SELECT count(*) FILTER (WHERE event_type = 'SubmissionFinished') AS finished,
       count(DISTINCT correlation_id) FILTER (WHERE event_type = 'SubmissionFinished') AS distinct_finished,
       count(*) FILTER (WHERE event_type = 'ScoreComputed') AS scored
FROM event_archive WHERE correlation_id = ANY($1::text[])
"""


async def submit_all(url: str, cli_ids: list[str], count: int, rate: float | None, concurrency: int) -> list[int]:
    ids: list[int] = []
    errors: list[int] = []
    limit = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60,
                                 limits=httpx.Limits(max_connections=concurrency)) as client:
        async def one(i: int) -> None:
            async with limit:
                for attempt in range(3):
                    try:
                        response = await client.post(
                            f"/submission/{BOARD}/null/leaderboard",
                            headers={"X-Popcorn-Cli-Id": cli_ids[i % len(cli_ids)]},
                            files={"file": ("submission.py", CODE.encode())},
                        )
                        break
                    except httpx.TransportError:
                        # a kept-alive connection the server closed as we reused it; counted, then retried
                        errors.append(i)
                        if attempt == 2:
                            raise
                response.raise_for_status()
                ids.append(response.json()["details"]["id"])

        start = time.monotonic()
        tasks = []
        for i in range(count):
            if rate:
                await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
    if errors:
        print(f"  {len(errors)} requests hit a closed connection and were retried")
    return ids


async def wait_finished(database_url: str, ids: list[int], timeout: float) -> dict:
    conn = await asyncpg.connect(database_url)
    try:
        deadline = time.monotonic() + timeout
        while True:
            row = await conn.fetchrow(FINISHED_SQL, [str(i) for i in ids])
            if row["distinct_finished"] == len(ids) or time.monotonic() > deadline:
                return dict(row)
            await asyncio.sleep(0.2)
    finally:
        await conn.close()


async def measure(database_url: str, ids: list[int]) -> tuple[list[float], float]:
    conn = await asyncpg.connect(database_url)
    try:
        latencies = sorted(float(r["ms"]) for r in await conn.fetch(LATENCY_SQL, [str(i) for i in ids]))
        span = await conn.fetchrow(SPAN_SQL, [str(i) for i in ids])
    finally:
        await conn.close()
    seconds = (span["last"] - span["first"]).total_seconds()
    return latencies, len(ids) / seconds if seconds > 0 else float("inf")


def report(label: str, ids: list[int], finished: dict, latencies: list[float], rate: float) -> None:
    lost = len(ids) - finished["distinct_finished"]
    doubled = finished["finished"] - finished["distinct_finished"]
    print(f"{label}: {len(ids)} submissions, lost {lost}, finished twice {doubled}, scored {finished['scored']}")
    if latencies:
        print(f"  accepted -> ranked overhead: p50 {percentile(latencies, 50):.1f} ms, "
              f"p99 {percentile(latencies, 99):.1f} ms, mean {statistics.fmean(latencies):.1f} ms")
    print(f"  sustained: {rate:.0f} submissions/s (first received to last finished)")


def run(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="kb-bench-"))
    with servers(workdir, "kb_bench") as (nats_url, database_url):
        platform = Platform(nats_url, database_url, workdir, local_gpus={"cpu": 1}, null_gpus=("null",))
        try:
            platform.start()
            platform.add_boards(identity_board(BOARD, ["null"]))
            cli_ids = [platform.register(f"bench-{i}", f"bench{i}") for i in range(args.users)]
            print(f"stack up; admin token {ADMIN_TOKEN!r}; logs in {workdir}; load average {load()}")

            steady = asyncio.run(submit_all(platform.url, cli_ids, args.steady, args.steady_rate, 8))
            finished = asyncio.run(wait_finished(database_url, steady, 120))
            latencies, rate = asyncio.run(measure(database_url, steady))
            report(f"steady {args.steady_rate:.0f}/s", steady, finished, latencies, rate)

            loaded = asyncio.run(submit_all(platform.url, cli_ids, args.submissions, None, args.concurrency))
            finished = asyncio.run(wait_finished(database_url, loaded, 600))
            latencies, rate = asyncio.run(measure(database_url, loaded))
            report("full load", loaded, finished, latencies, rate)
        finally:
            platform.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=1000, help="submissions sent as fast as possible")
    parser.add_argument("--steady", type=int, default=200, help="submissions sent at the steady rate")
    parser.add_argument("--steady-rate", type=float, default=20.0, help="submissions per second in the steady phase")
    parser.add_argument("--concurrency", type=int, default=32, help="HTTP requests in flight under full load")
    parser.add_argument("--users", type=int, default=20)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
