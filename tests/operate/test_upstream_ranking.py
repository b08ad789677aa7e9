"""The import's ranking rule (which upstream runs become a ScoreComputed) against upstream's own ranking query, over
fixture rows that tell its clauses apart: a secret run that failed only in its test stage, and a hacked submission
by a user who is not banned (tests/support/upstream_db.py)."""

from __future__ import annotations

import asyncio

from schemas.events import ScoreComputed, SubmissionFinished
from services.operate import upstream_catalogue as catalogue_map
from services.operate.upstream_source import opened
from services.operate.upstream_submissions import submission_events
from tests.support.upstream_db import SUBMISSIONS, USERS, upstream_ranking

GPUS = {"matmul": ["A100", "H100"], "sorting-closed": ["B200"], "old-cuda": ["T4"]}


def imported_events(url: str) -> list:
    async def read() -> list:
        report = catalogue_map.Report()
        async with opened(url) as upstream:
            catalogue = await upstream.catalogue()
            _, boards = catalogue_map.boards(catalogue, await upstream.first_seen(), report)
            _, names, _ = catalogue_map.users(catalogue, report)
            return [event async for submission in upstream.submissions()
                    if submission.row["leaderboard_id"] in boards
                    for event in submission_events(submission, boards[submission.row["leaderboard_id"]], names,
                                                   report)]

    return asyncio.run(read())


def test_each_users_best_imported_score_is_upstreams_ranking(upstream_url):
    scores = [e for e in imported_events(upstream_url) if isinstance(e, ScoreComputed)]
    for board, gpus in GPUS.items():
        for gpu in gpus:
            best: dict[str, float] = {}
            for score in scores:
                if (score.leaderboard, score.gpu) == (board, gpu):
                    best[score.user_id] = min(score.score, best.get(score.user_id, score.score))
            upstream = {row["user_id"]: row["score"] for row in upstream_ranking(upstream_url, board, gpu)}
            assert best == upstream, f"{board} on {gpu}"


def test_no_hacked_submission_gets_a_score_whoever_made_it(upstream_url):
    banned = {user_id for user_id, *_, is_banned in USERS if is_banned}
    hacked_by_the_unbanned = [row for row in SUBMISSIONS if "hacked" in (row[6], row[7]) and row[1] not in banned]
    assert hacked_by_the_unbanned  # the row that tells: a ban cannot be what keeps it off the board

    events = imported_events(upstream_url)
    hacked = {e.submission_id for e in events if isinstance(e, SubmissionFinished) and e.status == "hacked"}
    assert len(hacked) == sum(1 for row in SUBMISSIONS if "hacked" in (row[6], row[7]))
    assert [e.submission_id for e in events if isinstance(e, ScoreComputed) and e.submission_id in hacked] == []
