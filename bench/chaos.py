"""Chaos: submissions through the real stack while services are SIGKILLed, NATS and Postgres restarted.

Every service runs as a subprocess against an embedded NATS and Postgres; the dispatcher serves GPU `null` (a harness
that does no work), so runs are instant and the platform itself is what is being shaken. While submissions are sent,
a random service is SIGKILLed every `--kill-every` seconds and started again at once; half-way, NATS is restarted
once and Postgres once. Then everything is left to settle and checked:

- nothing lost: every accepted submission finished, once, with its two runs and one score;
- nothing sent twice: each submission carries an Idempotency-Key, so a retry after a lost answer is the same one and
  the read model holds exactly as many submissions as were sent;
- nothing doubled: no submission, run or score is in the read model twice, and no event was applied twice;
- the read model equals an undisturbed run of the same log: the tables are dumped, rebuilt from the stream by one
  consumer applying it in order (`kernelbot events replay`), and compared row for row;
- the board is the one the submissions call for (equal null scores: each user's earliest submission, all rank 1).

    .venv/bin/python bench/chaos.py --submissions 5000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from problems import PROBLEMS_ROOT  # noqa: E402
from services.kit.embedded import create_database, start_nats, start_postgres  # noqa: E402
from services.ledger import repository as ledger_repository  # noqa: E402
from services.operate import replay  # noqa: E402
from services.operate.db import connection  # noqa: E402
from tests.support.platform import SERVICES, Platform, identity_board  # noqa: E402

BOARD = "chaos"
CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
USERS = 10
TIME_OF_PROJECTION = ("recorded_at", "updated_at")


async def submit_all(url: str, cli_ids: list[str], count: int, concurrency: int) -> tuple[list[int], int]:
    """Send `count` submissions, retrying what the chaos interrupts; returns the accepted ids and the retries."""
    ids: list[int] = []
    retries = 0
    limit = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        async def one(i: int) -> None:
            nonlocal retries
            async with limit:
                for _ in range(600):
                    try:
                        response = await client.post(
                            f"/submission/{BOARD}/null/leaderboard",
                            # one key per submission: a retry after a lost answer is the same submission
                            headers={"X-Popcorn-Cli-Id": cli_ids[i % len(cli_ids)],
                                     "Idempotency-Key": f"chaos-{i}"},
                            files={"file": ("submission.py", CODE.encode())})
                        if response.status_code == 202:
                            ids.append(response.json()["details"]["id"])
                            if len(ids) % 250 == 0:  # a long run shows it is moving
                                print(f"accepted {len(ids)}/{count}, {retries} retries", file=sys.stderr, flush=True)
                            return
                    except httpx.HTTPError:
                        pass
                    retries += 1
                    await asyncio.sleep(0.5)
                raise RuntimeError(f"submission {i} never accepted")

        await asyncio.gather(*(one(i) for i in range(count)))
    return ids, retries


class Chaos(threading.Thread):
    def __init__(self, platform: Platform, nats, postgres, kill_every_s: float) -> None:
        super().__init__(daemon=True)
        self.platform, self.nats, self.postgres = platform, nats, postgres
        self.kill_every_s = kill_every_s
        self.stop_at = threading.Event()
        self.kills: dict[str, int] = dict.fromkeys(SERVICES, 0)
        self.infrastructure: list[str] = []
        self.restarts = 0  # services that exited on their own and were started again
        self.restart_nats_at = self.restart_postgres_at = None

    def run(self) -> None:
        rng = random.Random(7)
        while not self.stop_at.wait(self.kill_every_s):
            try:
                self._strike(rng)
            except Exception as exc:  # noqa: BLE001 - the chaos must go on; say what went wrong
                print(f"chaos step failed: {exc!r}", file=sys.stderr, flush=True)

    def _strike(self, rng: random.Random) -> None:
        self.restarts += start_what_stopped(self.platform)
        name = rng.choice(SERVICES)
        self.platform.kill(name)
        self.kills[name] += 1
        start_service(self.platform, name)
        if self.restart_nats_at is not None and time.monotonic() > self.restart_nats_at:
            self.restart_nats_at = None
            self.nats.restart()
            self.infrastructure.append("nats")
        if self.restart_postgres_at is not None and time.monotonic() > self.restart_postgres_at:
            self.restart_postgres_at = None
            self.postgres.restart()
            self.infrastructure.append("postgres")



def start_service(platform: Platform, name: str) -> None:
    try:
        platform.start(name)
    except RuntimeError:
        pass  # a gateway not ready yet (NATS or Postgres away) keeps starting; submitters retry


def start_what_stopped(platform: Platform) -> int:
    """Like `kernelbot up`, start again each service that exited on its own; one still shutting down is left until
    it has (it would hold its consumer and its port beside its successor). Returns how many were started."""
    started = 0
    for name in SERVICES:
        child = platform.children.get(name)
        if child is None or child.poll() is not None:  # poll() answers only once the process has really exited
            start_service(platform, name)
            started += 1
    return started


def dump(database_url: str) -> dict[str, list[str]]:
    async def read():
        import asyncpg

        conn = await asyncpg.connect(database_url)
        try:
            dropped = "".join(f" - '{c}'" for c in TIME_OF_PROJECTION)
            return {t: [r[0] for r in await conn.fetch(f"SELECT (to_jsonb(x){dropped})::text FROM {t} x ORDER BY 1")]
                    for t in [*ledger_repository.TABLES, "event_archive", *replay.SCORER_TABLES]}
        finally:
            await conn.close()

    return asyncio.run(read())


async def rebuild(database_url: str, nats_url: str) -> None:
    async with connection(database_url) as conn:
        for name in replay.PROJECTIONS:
            await replay.REBUILDERS[name](conn, "stream", nats_url, lambda _n: None)


def scalar(database_url: str, sql: str, *args):
    async def read():
        import asyncpg

        conn = await asyncpg.connect(database_url)
        try:
            return await conn.fetchval(sql, *args)
        finally:
            await conn.close()

    return asyncio.run(read())


def wait_settled(platform: Platform, database_url: str, ids: list[int], timeout_s: float) -> tuple[float | None, int]:
    """Seconds until every accepted submission shows done, None if some never do (the checks say which); and how
    many services were started again meanwhile, `kernelbot up`'s way."""
    started = time.monotonic()
    restarts = 0
    while time.monotonic() - started < timeout_s:
        restarts += start_what_stopped(platform)
        done = scalar(database_url, "SELECT count(*) FROM submissions WHERE done AND id = ANY($1::bigint[])", ids)
        if done == len(ids):
            return time.monotonic() - started, restarts
        time.sleep(1)
    return None, restarts


CHECKS = {
    "submissions finished exactly once": """
        SELECT count(*) FROM (SELECT correlation_id FROM event_archive WHERE event_type = 'SubmissionFinished'
                              GROUP BY correlation_id HAVING count(DISTINCT event_id) <> 1) x""",
    "submissions not succeeded": "SELECT count(*) FROM submissions WHERE status <> 'succeeded'",
    "jobs not succeeded": "SELECT count(*) FROM jobs WHERE status <> 'succeeded'",
    "submissions without exactly two runs": """
        SELECT count(*) FROM submissions s WHERE (SELECT count(*) FROM run_requests r WHERE r.submission_id = s.id
                                                  AND r.status = 'completed') <> 2""",
    "submissions without exactly one score": """
        SELECT count(*) FROM submissions s WHERE (SELECT count(*) FROM scores c WHERE c.submission_id = s.id) <> 1""",
    "events applied twice by the ledger": """
        SELECT count(*) FROM (SELECT event_id FROM event_archive GROUP BY event_id HAVING count(*) > 1) x""",
    "runs left unfinished in the queue": "SELECT count(*) FROM dispatch_runs WHERE status <> 'finished'",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=5000)
    parser.add_argument("--kill-every", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--settle-timeout", type=float, default=180)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kb-chaos-"))
    with start_nats(root / "nats") as nats, start_postgres(root / "postgres") as postgres:
        database_url = create_database(postgres.url, "chaos")
        platform = Platform(nats.url, database_url, root, null_gpus=("null",))
        platform.start()
        platform.add_boards(identity_board(BOARD, ["null"]))
        cli_ids = [platform.register(str(9000 + i), f"chaos{i}") for i in range(USERS)]
        chaos = Chaos(platform, nats, postgres, args.kill_every)
        started = time.monotonic()
        chaos.restart_nats_at = started + 20
        chaos.restart_postgres_at = started + 40
        chaos.start()
        ids, retries = asyncio.run(submit_all(platform.url, cli_ids, args.submissions, args.concurrency))
        sent_s = time.monotonic() - started
        chaos.stop_at.set()
        chaos.join()  # its end stops nothing: the services it started are the starter thread's children
        settled_s, settle_restarts = wait_settled(platform, database_url, ids, args.settle_timeout)
        time.sleep(3)  # let the last rank changes and heartbeats land
        failures = {name: scalar(database_url, sql) for name, sql in CHECKS.items()}
        live = dump(database_url)
        platform.stop()
        asyncio.run(rebuild(database_url, nats.url))
        rebuilt = dump(database_url)
        differing = sorted(t for t in live if live[t] != rebuilt[t])
        ranking_ok = scalar(database_url, """
            SELECT (SELECT array_agg(submission_id ORDER BY submission_id) FROM scorer_best WHERE leaderboard = $1)
                 = (SELECT array_agg(id ORDER BY id) FROM (SELECT DISTINCT ON (user_id) id FROM submissions
                                                          ORDER BY user_id, submitted_at, id) x)""", BOARD)
        report = {
            "submissions_accepted": len(ids), "submissions_in_read_model": scalar(
                database_url, "SELECT count(*) FROM submissions"), "http_retries": retries,
            "send_seconds": round(sent_s, 1), "settle_seconds": settled_s and round(settled_s, 1),
            "kills": chaos.kills, "restarts_of_exited_services": chaos.restarts + settle_restarts,
            "infrastructure_restarts": chaos.infrastructure,
            "failed_checks": {k: v for k, v in failures.items() if v}, "tables_differing_from_rebuild": differing,
            "board_as_expected": ranking_ok, "events": scalar(database_url, "SELECT count(*) FROM event_archive"),
        }
        print(json.dumps(report, indent=2))
        ok = (not report["failed_checks"] and not differing and ranking_ok and len(chaos.infrastructure) == 2
              and settled_s is not None and report["submissions_in_read_model"] == len(set(ids)) == args.submissions)
        print("PASS: nothing lost, nothing doubled" if ok else "FAIL")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
