"""Rankings read while their standings keep moving (services/gateway/fastpaths/standings_cache.py, rankings.py): through the
real ledger and gateway, many readers at once never see an older state than one already seen, a change costs at
most one render per page shape, and a closed board stays closed whatever is cached or being rendered.

A writer publishes new #1s one after the other (each waits for the ledger's position, so every one is a version of
its own); readers ask back to back. Each answer is a state: the number of the #1 it shows. An answer must show at least
every state that any answer completed before its request was sent showed.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx
import nats
import pytest

from schemas.envelope import Event
from schemas.events import ScoreComputed, SubmissionReceived
from schemas.streams import EVENTS
from services.core.infrastructure.position import LedgerPosition
from services.kit.bus import MSG_ID_HEADER, encode
from services.kit.db import create_pool
from tests.gateway.admission import admin
from tests.gateway.conftest import cli, new_user
from tests.gateway.test_ranking_cache import cache_hits
from tests.support.platform import Platform, identity_board


@pytest.fixture(scope="module")
def gateway(gateway_processes: Platform) -> Platform:
    """Every service a subprocess here: these tests need the gateway on a port (tests/gateway/conftest.py)."""
    return gateway_processes


CHANGES = 30
GPU = "idle"  # no runner serves it: the only scores are the ones published here
_boards = itertools.count(1)
_first_ids = itertools.count(700_000_000, 1_000)
FILE = re.compile(r"live-(\d+)\.py")


def renders(platform) -> float:
    text = platform.http.get("/metrics").text
    return sum(float(n) for n in re.findall(r'^kb_standings_renders_total\{cause="[a-z]+"\} ([0-9.e+]+)$', text,
                                            flags=re.M))


def live_board(platform, visibility: str = "public") -> str:
    name = f"live-{next(_boards)}"
    platform.add_boards(identity_board(name, [GPU], visibility))
    return name


def new_top(board: str, first_id: int, state: int) -> list[Event]:
    """Submission `state` of the board, by a user of its own, better than every earlier one."""
    submission_id, user = first_id + state, f"live-user-{first_id + state}"
    return [
        SubmissionReceived(submission_id=submission_id, leaderboard=board, gpus=[GPU], mode="leaderboard",
                           user_id=user, user_name=user, file_name=f"live-{state}.py", code="x = 1\n"),
        ScoreComputed(submission_id=submission_id, leaderboard=board, gpu=GPU, user_id=user, user_name=user,
                      run_id=f"{submission_id}.{GPU}.public", score=1.0 - state / 1000, ranking_by="last",
                      submitted_at=datetime.now(UTC), correlation_id=str(submission_id)),
    ]


async def write(platform, board: str, first_id: int, done: asyncio.Event, halfway: asyncio.Event | None = None):
    """Publish CHANGES new #1s, each once the ledger has projected the one before it."""
    client = await nats.connect(platform.nats_url)
    pool = await create_pool(platform.database_url, 2)
    position = LedgerPosition()
    await position.start(platform.database_url, pool)
    try:
        js = client.jetstream()
        for state in range(1, CHANGES + 1):
            for event in new_top(board, first_id, state):
                ack = await js.publish(event.subject, encode(event), headers={MSG_ID_HEADER: event.message_id},
                                       stream=EVENTS.name)
            assert await position.reached(ack.seq, 30), "the ledger did not project a new #1"
            if halfway is not None and state == CHANGES // 2:
                halfway.set()
    finally:
        done.set()
        await position.stop()
        await pool.close()
        await client.close()


@dataclass
class Seen:
    """The newest state any completed answer showed, and every violation found."""

    newest: int = 0
    answers: int = 0
    states: set[int] = field(default_factory=set)
    older: list[str] = field(default_factory=list)

    def answered(self, floor: int, state: int, what: str) -> None:
        self.answers += 1
        self.states.add(state)
        if state < floor:
            self.older.append(f"{what}: state {state} after {floor} was seen")
        self.newest = max(self.newest, state)


def ranking_state(answer: httpx.Response) -> int:
    entries = answer.json()
    return int(FILE.match(entries[0]["submission_name"]).group(1)) if entries else 0


def page_state(answer: httpx.Response) -> int:
    found = FILE.search(answer.text)
    return int(found.group(1)) if found else 0


async def read(http: httpx.AsyncClient, path: str, state_of, seen: Seen, done: asyncio.Event,
               conditional: bool = False, headers: dict | None = None) -> None:
    tag, mine = None, 0
    while not done.is_set():
        floor = seen.newest
        sent = {**(headers or {}), **({"If-None-Match": tag} if conditional and tag else {})}
        answer = await http.get(path, headers=sent)
        assert answer.status_code in (200, 304), answer.text
        mine = mine if answer.status_code == 304 else state_of(answer)
        tag = answer.headers.get("etag")
        seen.answered(floor, mine, f"{path} ({answer.status_code})")


def test_readers_of_a_live_ranking_never_see_an_older_state_and_a_change_costs_one_render(gateway):
    board = live_board(gateway)
    ranking, page = f"/submissions/{board}/{GPU}?limit=20", f"/web/leaderboards/{board}?gpu={GPU}"

    async def scenario() -> Seen:
        seen, done = Seen(), asyncio.Event()
        async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
            await asyncio.gather(
                write(gateway, board, next(_first_ids), done),
                *(read(http, ranking, ranking_state, seen, done, conditional=n % 4 == 0) for n in range(24)),
                *(read(http, page, page_state, seen, done) for _ in range(2)))
        return seen

    renders_before = renders(gateway)
    seen = asyncio.run(scenario())
    rendered = renders(gateway) - renders_before

    assert seen.older == []
    assert seen.newest == CHANGES and len(seen.states) > CHANGES // 3  # the readers did see the board move
    # at most one render per version (the board's first and one per change) and page shape read (the JSON ranking,
    # the web page), however many requests came
    assert rendered <= 2 * (CHANGES + 1) < seen.answers / 4, (rendered, seen.answers)
    last = gateway.http.get(ranking)
    assert ranking_state(last) == CHANGES and [e["rank"] for e in last.json()][:3] == [1, 2, 3]


def test_a_closed_live_board_stays_closed_to_outsiders_while_its_insider_sees_it_move(gateway):
    board = live_board(gateway, "closed")
    _, insider = new_user(gateway)
    _, outsider = new_user(gateway)
    [code] = admin(gateway, "POST", "/admin/invites", json={"leaderboard": board, "count": 1}).json()["codes"]
    assert gateway.http.post("/user/join", headers=cli(insider), json={"code": code}).status_code == 200
    ranking, count = f"/submissions/{board}/{GPU}?limit=20", f"/submission_count/{board}/{GPU}"
    leaks: list[str] = []

    async def refused(http: httpx.AsyncClient, headers: dict, status: int, done: asyncio.Event) -> None:
        while not done.is_set():
            for path in (ranking, count, f"/web/leaderboards/{board}?gpu={GPU}"):
                answer = await http.get(path, headers=headers)
                if answer.status_code not in (status, 404) or FILE.search(answer.text) or "etag" in answer.headers:
                    leaks.append(f"{path} {headers}: {answer.status_code} {answer.text[:200]}")

    async def scenario() -> Seen:
        seen, done = Seen(), asyncio.Event()
        async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
            await asyncio.gather(
                write(gateway, board, next(_first_ids), done),
                *(read(http, ranking, ranking_state, seen, done, conditional=n == 0, headers=cli(insider))
                  for n in range(4)),
                *(refused(http, {}, 401, done) for _ in range(3)),
                *(refused(http, cli(outsider), 403, done) for _ in range(3)))
        return seen

    seen = asyncio.run(scenario())
    assert leaks == []
    assert seen.older == [] and seen.newest == CHANGES


def test_a_live_board_closed_midway_is_refused_to_every_request_sent_after_the_close(gateway):
    board = live_board(gateway)
    ranking = f"/submissions/{board}/{GPU}?limit=20"
    after_close: list[tuple[int, str]] = []

    async def scenario() -> Seen:
        seen, done, halfway = Seen(), asyncio.Event(), asyncio.Event()
        closed_at: list[float] = []

        async def close() -> None:
            await halfway.wait()
            closing = await asyncio.to_thread(admin, gateway, "POST", f"/admin/leaderboards/{board}/visibility",
                                              json={"visibility": "closed"})
            assert closing.status_code == 200, closing.text
            closed_at.append(time.monotonic())  # the admin route answers once the ledger holds the change

        async def anonymous(http: httpx.AsyncClient) -> None:
            while not done.is_set():
                sent = time.monotonic()
                answer = await http.get(ranking)
                if closed_at and sent > closed_at[0]:
                    after_close.append((answer.status_code, answer.text[:200]))
                elif answer.status_code == 200:
                    seen.answered(0, ranking_state(answer), ranking)

        async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
            await asyncio.gather(write(gateway, board, next(_first_ids), done, halfway), close(),
                                 *(anonymous(http) for _ in range(12)))
        return seen

    hits_before = cache_hits(gateway)
    seen = asyncio.run(scenario())
    assert seen.states and cache_hits(gateway) > hits_before  # it was read, and from the cache, while public
    assert after_close and {status for status, _ in after_close} == {401}, after_close[:3]
    assert not any(FILE.search(text) for _, text in after_close)
