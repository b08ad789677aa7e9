"""One user's standing and rank (what a Discord verdict says) against the whole ranking, on standings the ledger
projected: the same rank for everyone, ties included, without reading the board."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from services.core.readmodel import board_reads, standing_reads
from services.kit.db import apply_migrations, create_pool
from services.ledger.repository import project_batch
from tests.operate.test_standings import BOARD, GPU, T0, submission_events, users
from tests.support.platform import identity_board

PEOPLE = users(4, first_id=600)


async def projected(pool, events) -> int:
    """The board and PEOPLE projected by the ledger's own code with `events`, on an empty read model: its id."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("TRUNCATE leaderboards, users, submissions, jobs, run_requests, runs, scores, "
                           "standings, standing_versions, precheck_verdicts, event_archive RESTART IDENTITY")
        await project_batch(conn, list(enumerate([identity_board(BOARD, [GPU]), *PEOPLE, *events], start=1)))
    return (await board_reads.leaderboard(pool, BOARD))["id"]


async def standings_and_ranking(database_url: str, events) -> tuple[dict, dict, object]:
    pool = await create_pool(database_url, 2)
    try:
        board = await projected(pool, events)
        ranking = {r["user_id"]: (r["submission_id"], r["rank"])
                   for r in await standing_reads.ranking(pool, board, GPU, None, 0)}
        mine = {}
        for person in PEOPLE:
            row = await standing_reads.user_standing(pool, board, GPU, person.user_id)
            mine[person.user_id] = (row["submission_id"], row["rank"])
        nobody = await standing_reads.user_standing(pool, board, GPU, "no-such-user")
        return ranking, mine, nobody
    finally:
        await pool.close()


def test_a_users_rank_is_the_rankings_rank_ties_sharing_it(database_url):
    apply_migrations(database_url)
    ann, bob, cy, dan = PEOPLE
    # bob ties ann's best later: both rank 1 (the ranking lists ann first); cy ranks 3, dan (ann's old score) 4
    plan = [(1, ann, 9_000), (2, ann, 5_000), (3, bob, 5_000), (4, cy, 7_000), (5, dan, 9_000), (6, bob, 6_000)]
    events = [event for sid, who, ns in plan
              for event in submission_events(sid, BOARD, GPU, who, ns, T0 + timedelta(minutes=sid))]

    ranking, mine, nobody = asyncio.run(standings_and_ranking(database_url, events))

    assert mine == ranking
    assert [mine[p.user_id] for p in PEOPLE] == [(2, 1), (3, 1), (4, 3), (5, 4)]
    assert nobody is None


async def read_with_results(database_url: str, events, offset: int, known) -> tuple:
    pool = await create_pool(database_url, 2)
    try:
        board = await projected(pool, events)
        whole = await standing_reads.ranking_with_results(pool, board, GPU, None, offset)
        told = await standing_reads.ranking_with_results(pool, board, GPU, None, offset, known)
        return whole, told
    finally:
        await pool.close()


def test_a_ranking_reads_only_the_results_whose_interval_its_reader_has_not_kept(database_url):
    """A live board's page is read again at every move: the runs whose intervals the reader keeps are not read again,
    the others come with the same result map as in the one-query read, and the entry above the page comes too."""
    apply_migrations(database_url)
    ann, bob, cy, dan = PEOPLE
    plan = [(1, ann, 5_000), (2, bob, 6_000), (3, cy, 7_000), (4, dan, 8_000)]
    events = [event for sid, who, ns in plan
              for event in submission_events(sid, BOARD, GPU, who, ns, T0 + timedelta(minutes=sid))]
    asked = []

    def known(run_id: str, ranking_by: str) -> bool:
        asked.append(ranking_by)
        return not run_id.startswith(("2.", "4."))  # bob's and dan's intervals are not kept

    (above, rows), (told_above, told) = asyncio.run(read_with_results(database_url, events, 1, known))

    assert above["user_id"] == told_above["user_id"] == ann.user_id
    assert [(r["user_id"], r["rank"]) for r in told] == [(r["user_id"], r["rank"]) for r in rows] == [
        (bob.user_id, 2), (cy.user_id, 3), (dan.user_id, 4)]
    assert all(r["stage_result"] for r in rows) and set(asked) == {rows[0]["ranking_by"]}
    assert [r["stage_result"] for r in told] == [rows[0]["stage_result"], None, rows[2]["stage_result"]]
    assert told_above["stage_result"] is None
