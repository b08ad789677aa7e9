"""Who sees a new #1 of bench/live.py, and when: the ledger's notification of the standings' move, the JSON ranking,
the web page, the scorer's LeaderboardRankChanged (what Discord's podium follows); and the CPU each process used."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import asyncpg
import httpx
import nats
import psutil
from nats.js.api import DeliverPolicy

from schemas.events import LeaderboardRankChanged, ScoreComputed
from schemas.streams import EVENTS
from services.scorer.handlers import CONSUMERS

# projected: the ledger's kb_standings notification reached the version (stream sequence) of the #1's ScoreComputed
OBSERVERS = ("projected", "ranking", "page", "podium")
SEEN_WITHIN_S = 5.0  # a new #1 not seen by then counts as this late


@dataclass
class Watch:
    """New #1s published and not yet seen, by each observer; how long each took to be seen.

    With the scorer on, a new #1's clock starts when the scorer's ScoreComputed for it is on the log (`scored`); until
    then it is `awaiting`, and an observer that shows it already (the podium's event may arrive first) is noted."""

    pending: dict[str, dict[int, float]] = field(default_factory=lambda: {n: {} for n in OBSERVERS})
    seen: dict[str, list[float]] = field(default_factory=lambda: {n: [] for n in OBSERVERS})
    sequences: dict[int, int] = field(default_factory=dict)  # new #1 -> stream sequence of its ScoreComputed
    awaiting: dict[int, float] = field(default_factory=dict)  # new #1 -> when its runs were published
    early: dict[str, set[int]] = field(default_factory=lambda: {n: set() for n in OBSERVERS})
    version: int = 0  # the newest standings version the ledger announced
    unscored: int = 0  # awaited new #1s whose ScoreComputed did not come within SEEN_WITHIN_S
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    drained: asyncio.Event = field(default_factory=asyncio.Event)

    def published(self, submission_id: int, at: float, observers: list[str]) -> None:
        for name in observers:
            self.pending[name][submission_id] = at
        self.drained.clear()
        self.wake.set()

    def await_score(self, submission_id: int) -> None:
        self.awaiting[submission_id] = time.monotonic()
        self.drained.clear()

    def scored(self, submission_id: int, sequence: int, observers: list[str]) -> None:
        """The scorer's ScoreComputed of an awaited new #1 is on the log: its clock starts now."""
        if self.awaiting.pop(submission_id, None) is None:
            return
        self.sequences[submission_id] = sequence
        self.published(submission_id, time.monotonic(), observers)
        if sequence <= self.version:
            self.saw("projected", {submission_id})
        for name in observers:
            if submission_id in self.early[name]:
                self.early[name].discard(submission_id)
                self.saw(name, {submission_id})

    def _check_drained(self) -> None:
        if not any(self.pending.values()) and not self.awaiting:
            self.drained.set()

    def saw(self, name: str, submission_ids: set[int]) -> None:
        now = time.monotonic()
        for submission_id in [s for s in self.pending[name] if s in submission_ids]:
            self.seen[name].append(now - self.pending[name].pop(submission_id))
        self.early[name].update(s for s in submission_ids if s in self.awaiting)
        self._check_drained()

    def expire(self) -> None:
        now = time.monotonic()
        for name, pending in self.pending.items():
            for submission_id in [s for s, at in pending.items() if now - at > SEEN_WITHIN_S]:
                pending.pop(submission_id)
                self.seen[name].append(SEEN_WITHIN_S)
        for submission_id in [s for s, at in self.awaiting.items() if now - at > SEEN_WITHIN_S]:
            self.awaiting.pop(submission_id)
            self.unscored += 1
        self._check_drained()


async def watch_http(client: httpx.AsyncClient, name: str, path: str, watch: Watch, stop: asyncio.Event,
                     every_s: float = 0.0) -> None:
    """Read `path` every `every_s` (0: back to back) while a new #1 waits to be seen there; idle otherwise."""
    while not stop.is_set():
        watch.expire()
        if not watch.pending[name]:
            watch.wake.clear()
            try:
                await asyncio.wait_for(watch.wake.wait(), 0.2)
            except TimeoutError:
                pass
            continue
        answer = await client.get(path)
        if name == "ranking":
            watch.saw(name, {entry["submission_id"] for entry in answer.json()})
        else:
            watch.saw(name, {s for s in watch.pending[name] if f"k{s}.py" in answer.text})
        if every_s:
            await asyncio.sleep(every_s)


async def watch_podium(client, watch: Watch):
    async def on_change(message) -> None:
        # Any place on the podium counts, as any place in the ranking does for "ranking": a #1 that a newer #1
        # overtook before the scorer announced it is on the podium as #2, and Discord shows it there.
        top = json.loads(message.data).get("top") or []
        watch.saw("podium", {entry["submission_id"] for entry in top})
    return await client.subscribe(LeaderboardRankChanged.subject, cb=on_change)


async def watch_scores(client, watch: Watch, observers: list[str]):
    """The scorer's ScoreComputed events as the log holds them (their stream sequence), from now on."""
    async def on_score(message) -> None:
        watch.scored(json.loads(message.data)["submission_id"], message.metadata.sequence.stream, observers)
    return await client.jetstream().subscribe(ScoreComputed.subject, cb=on_score, ordered_consumer=True,
                                              deliver_policy=DeliverPolicy.NEW)


async def watch_projection(database_url: str, watch: Watch) -> asyncpg.Connection:
    def on_move(_conn, _pid, _channel, payload: str) -> None:
        version = json.loads(payload)["version"]
        watch.version = max(watch.version, version)
        watch.saw("projected", {s for s, seq in watch.sequences.items() if seq <= version})
    conn = await asyncpg.connect(database_url)
    await conn.add_listener("kb_standings", on_move)
    return conn


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """User+system CPU of each process and its children (Postgres: the server and its backends), those that ended
    included (the parent's account of its reaped children)."""
    totals = {}
    for name, pid in pids.items():
        try:
            process = psutil.Process(pid)
            own = process.cpu_times()
            total = own.user + own.system + own.children_user + own.children_system
            family = process.children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        for each in family:
            try:
                times = each.cpu_times()
                total += times.user + times.system
            except psutil.NoSuchProcess:
                pass
        totals[name] = total
    return totals


async def scorer_idle(nats_url: str, limit_s: float) -> None:
    """Until every scorer consumer has nothing pending nor unacknowledged: a backlog (a redelivery of the fill's messages
    included) would otherwise be counted in the next measured phase."""
    client = await nats.connect(nats_url)
    started = time.monotonic()
    try:
        js = client.jetstream()
        while time.monotonic() - started < limit_s:
            infos = [await js.consumer_info(EVENTS.name, name) for name in CONSUMERS.values()]
            if all(i.num_pending == 0 and i.num_ack_pending == 0 for i in infos):
                return
            await asyncio.sleep(0.5)  # polling NATS: nothing announces a consumer's being idle
        raise TimeoutError("the scorer's consumers did not settle")
    finally:
        await client.close()
