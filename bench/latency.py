"""Submission latency as a popcorn-cli user sees it, broken into phases, on the real stack with the real local runner.

Every service runs as a subprocess (as `kernelbot up` runs them) against real NATS and Postgres; the dispatcher serves
GPU `cpu` with the local backend, so the bundled problems run through the real runner and harness. The client sends
what popcorn-cli v1.3.23 sends for a background submit: `POST /submission/{lb}/cpu/{mode}`, then
`GET /user/submissions/{id}` at once and every 5 s after each answer (30 s timeout per request), until `done`.

Per submission the phases come from the event archive (each event's `occurred_at`, and `recorded_at` when the ledger
made it visible) and from the runner's own stamps in the result (`FullResult.timing`, `EvalResult.timing`):

    POST -> accepted -> dispatched -> process started -> harness started -> harness finished -> RunCompleted
         -> scored -> visible to a poll -> seen by the client

For several runs (a ranked submission has a public and a secret run) the phases follow the run that completed last.
`RunDispatched` is recorded once the backend has started the job, so `dispatched -> process started` can be
negative: the runner process is already up when the dispatch is recorded.
`runner overhead/stage` is a stage's process wall time minus its harness's own loop (first to last result line);
`outside harness` is POST -> seen minus the time at least one harness loop was running.

    .venv/bin/python bench/latency.py                       # test identity_py x 20, leaderboard vectoradd_py x 5
    .venv/bin/python bench/latency.py --test 40 --leaderboard 0
    .venv/bin/python bench/latency.py --features-off          # the same without warm runner, long poll and chain
    .venv/bin/python bench/latency.py --no-chain              # the same with one harness process per stage
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.stack import load, percentile, servers  # noqa: E402
from problems import PROBLEMS_ROOT  # noqa: E402
from tests.support.platform import Platform  # noqa: E402

POLL_INTERVAL_S = 5.0  # popcorn-cli v1.3.23
REQUEST_TIMEOUT_S = 30.0
PHASES = ("accepted", "dispatched", "process started", "harness started", "harness finished", "RunCompleted",
          "scored", "visible to a poll", "seen by the client")
EVENTS_SQL = """
SELECT event_type, occurred_at, recorded_at, payload FROM event_archive WHERE correlation_id = $1 ORDER BY stream_seq
"""


def stamp(text: str | None) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


async def submit_and_poll(client: httpx.AsyncClient, cli_id: str, board: str, mode: str, code: str) -> dict:
    """popcorn-cli's background submit: POST, then GET at once and every 5 s until done."""
    headers = {"X-Popcorn-Cli-Id": cli_id}
    posted = time.time()
    response = await client.post(f"/submission/{board}/cpu/{mode}", headers=headers,
                                 files={"file": ("submission.py", code.encode())})
    response.raise_for_status()
    submission_id = response.json()["details"]["id"]
    polls = 0
    while True:
        view = await client.get(f"/user/submissions/{submission_id}", headers=headers, timeout=REQUEST_TIMEOUT_S)
        polls += 1
        view.raise_for_status()
        if view.json()["done"]:
            return {"id": submission_id, "posted": posted, "seen": time.time(), "polls": polls,
                    "status": view.json()["job"]["status"]}
        await asyncio.sleep(POLL_INTERVAL_S)


def run_phases(result: dict) -> tuple[float | None, float | None, float | None, list[tuple[float, float]], list[float]]:
    """(process started, first harness started, last harness finished, own-loop intervals, overhead per stage)."""
    stages = list(result.get("runs", {}).values())
    loops, overheads = [], []
    for stage in stages:
        timing = stage.get("timing") or {}
        begin, end = stamp(timing.get("harness_started")), stamp(timing.get("harness_finished"))
        started, ended = stamp(timing.get("process_started")), stamp(timing.get("process_ended"))
        if begin is not None and end is not None:
            loops.append((begin, end))
            if started is not None and ended is not None:
                overheads.append((ended - started) - (end - begin))
    runner_started = stamp((result.get("timing") or {}).get("runner_started"))
    first = loops[0][0] if loops else None
    last = loops[-1][1] if loops else None
    return runner_started, first, last, loops, overheads


def union_seconds(intervals: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for begin, end in sorted(intervals):
        if end > reach:
            total += end - max(begin, reach)
            reach = end
    return total


async def phases_of(conn: asyncpg.Connection, sample: dict) -> dict:
    rows = await conn.fetch(EVENTS_SQL, str(sample["id"]))
    first: dict[str, float] = {}
    dispatched: dict[str, float] = {}
    completed: list[tuple[float, str, dict]] = []
    visible = None
    for row in rows:
        kind, occurred = row["event_type"], row["occurred_at"].timestamp()
        first.setdefault(kind, occurred)
        payload = json.loads(row["payload"]) if isinstance(row["payload"], str) else row["payload"]
        if kind == "RunDispatched":
            dispatched.setdefault(payload.get("run_id", ""), occurred)
        if kind == "RunCompleted":
            completed.append((occurred, payload.get("run_id", ""), payload.get("result") or {}))
        if kind == "SubmissionFinished":
            visible = row["recorded_at"].timestamp()
    marks: dict[str, float | None] = {"POST": sample["posted"], "accepted": first.get("SubmissionAccepted"),
                                      "dispatched": first.get("RunDispatched")}
    loops, overheads = [], []
    for _, _, result in completed:
        _, _, _, run_loops, run_overheads = run_phases(result)
        loops += run_loops
        overheads += run_overheads
    if completed:
        last_completed, run_id, result = max(completed, key=lambda item: item[0])
        started, harness_started, harness_finished, _, _ = run_phases(result)
        marks.update({"dispatched": dispatched.get(run_id, marks["dispatched"]), "process started": started, "harness started": harness_started,
                      "harness finished": harness_finished, "RunCompleted": last_completed})
    marks.update({"scored": first.get("SubmissionFinished"), "visible to a poll": visible,
                  "seen by the client": sample["seen"]})
    return {"marks": marks, "harness_s": union_seconds(loops), "overheads": overheads,
            "total": sample["seen"] - sample["posted"], "polls": sample["polls"], "status": sample["status"]}


def report(label: str, measured: list[dict]) -> None:
    statuses = sorted({m["status"] for m in measured})
    print(f"\n{label}: {len(measured)} submissions, statuses {statuses}")
    totals = [m["total"] for m in measured]
    print(f"  POST -> client sees done:  p50 {percentile(totals, 50):6.3f} s   p99 {percentile(totals, 99):6.3f} s"
          f"   (polls per submission: p50 {percentile([m['polls'] for m in measured], 50):.0f})")
    previous = "POST"
    for phase in PHASES:
        gaps = [m["marks"][phase] - m["marks"][previous] for m in measured
                if m["marks"].get(phase) is not None and m["marks"].get(previous) is not None]
        if gaps:
            print(f"  {previous:>17} -> {phase:<18} p50 {percentile(gaps, 50) * 1000:8.1f} ms"
                  f"   p99 {percentile(gaps, 99) * 1000:8.1f} ms")
            previous = phase
    harness = [m["harness_s"] for m in measured]
    outside = [m["total"] - m["harness_s"] for m in measured]
    overheads = [o for m in measured for o in m["overheads"]]
    print(f"  harness own loops (union):  p50 {percentile(harness, 50):6.3f} s   p99 {percentile(harness, 99):6.3f} s")
    print(f"  outside harness loops:      p50 {percentile(outside, 50):6.3f} s   p99 {percentile(outside, 99):6.3f} s")
    if overheads:
        print(f"  runner overhead/stage:      p50 {percentile(overheads, 50) * 1000:6.1f} ms"
              f"  p99 {percentile(overheads, 99) * 1000:6.1f} ms  mean {statistics.fmean(overheads) * 1000:.1f} ms"
              f"  ({len(overheads)} stages; stage process wall minus its harness loop)")


async def measure(platform: Platform, database_url: str, cli_id: str, board: str, mode: str, code: str,
                  count: int, warm_up: int) -> list[dict]:
    samples = []
    async with httpx.AsyncClient(base_url=platform.url, timeout=REQUEST_TIMEOUT_S) as client:
        for index in range(warm_up + count):
            sample = await submit_and_poll(client, cli_id, board, mode, code)
            if index >= warm_up:
                samples.append(sample)
    conn = await asyncpg.connect(database_url)
    try:
        await asyncio.sleep(0.5)  # the archive records the last events a moment after the read model
        return [await phases_of(conn, sample) for sample in samples]
    finally:
        await conn.close()


def run(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="kb-latency-"))
    # --features-off: every process cold and no held polls, for a comparison on the same machine at the same time
    off = {"KB_WARM_RUNNER": "false", "KB_LONG_POLL_S": "0", "KB_HARNESS_CHAIN": "false"} if args.features_off else {}
    if args.no_chain:  # only the chain off: one harness process per stage (runner/launching/chain.py)
        off = {**off, "KB_HARNESS_CHAIN": "false"}
    with servers(workdir, "kb_latency") as (nats_url, database_url):
        platform = Platform(nats_url, database_url, workdir, local_gpus={"cpu": args.slots}, extra_env=off)
        try:
            platform.start()
            platform.load_bundled_problems()
            cli_id = platform.register("latency-bench", "latency")
            print(f"stack up (local runner, {args.slots} slot(s) on gpu cpu"
                  f"{'; OFF: ' + ', '.join(sorted(off)) if off else ''}); logs in {workdir}; "
                  f"{os.cpu_count()} cores, load average {load()}")
            examples = PROBLEMS_ROOT / "examples"
            if args.test:
                code = (examples / "identity_py" / "submission.py").read_text()
                measured = asyncio.run(measure(platform, database_url, cli_id, "identity_py", "test", code,
                                               args.test, args.warm_up))
                report("test mode, identity_py", measured)
            if args.leaderboard:
                code = (examples / "vectoradd_py" / "submission.py").read_text()
                measured = asyncio.run(measure(platform, database_url, cli_id, "vectoradd_py", "leaderboard", code,
                                               args.leaderboard, args.warm_up))
                report("leaderboard mode, vectoradd_py", measured)
            print(f"\nload average at the end: {load()}")
        finally:
            platform.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--test", type=int, default=20, help="identity_py test-mode submissions")
    parser.add_argument("--leaderboard", type=int, default=5, help="vectoradd_py leaderboard-mode submissions")
    parser.add_argument("--warm-up", type=int, default=1, help="submissions of each kind sent first, not counted")
    parser.add_argument("--slots", type=int, default=1, help="local runner slots (kernelbot up's default is 1)")
    parser.add_argument("--features-off", action="store_true",
                        help="KB_WARM_RUNNER=false, KB_LONG_POLL_S=0 and KB_HARNESS_CHAIN=false: cold processes, "
                             "immediate polls, one harness process per stage")
    parser.add_argument("--no-chain", action="store_true",
                        help="KB_HARNESS_CHAIN=false only: one harness process per stage, the rest as usual")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
