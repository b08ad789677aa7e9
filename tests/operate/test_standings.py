"""The standings projection (migration 0030) through the ledger's own code: each (board, GPU, user) holds the best of
what still stands, whatever order or batching the events came in, and the scorer's rules pick the same best."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path

from schemas.events import LeaderboardDeleted, ScoreComputed, SubmissionDeleted, SubmissionFinished
from schemas.operations_events import ScoreRevised
from services.kit.db import apply_migrations, create_pool
from services.ledger.repository import project_batch
from services.scorer.rescoring import best_per_user
from services.scorer.scoring import BoardEntry
from tests.support.platform import identity_board

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from ranked_events import T0, submission_events, users  # noqa: E402

BOARD, GPU = "standing", "H100"
PEOPLE = users(3, first_id=500)


def history():
    """Three users; ann improves, ties and regresses; bob ties ann's best later; cy scores once."""
    ann, bob, cy = PEOPLE
    plan = [(1, ann, 9_000), (2, ann, 5_000), (3, bob, 5_000), (4, ann, 5_000), (5, cy, 7_000), (6, ann, 8_000)]
    return [event for sid, who, ns in plan
            for event in submission_events(sid, BOARD, GPU, who, ns, T0 + timedelta(minutes=sid))]


async def project(database_url: str, batches) -> dict:
    pool = await create_pool(database_url, 2)
    try:
        async with pool.acquire() as conn:
            await conn.execute("TRUNCATE leaderboards, users, submissions, jobs, run_requests, runs, scores, "
                               "standings, standing_versions, event_archive RESTART IDENTITY")
            seq = 0
            for batch in batches:
                numbered = []
                for event in batch:
                    seq += 1
                    numbered.append((seq, event))
                async with conn.transaction():
                    await project_batch(conn, numbered)
            rows = await conn.fetch("SELECT user_id, submission_id, score, eligible_runs FROM standings "
                                    "ORDER BY score, submitted_at, submission_id")
            versions = await conn.fetch("SELECT version, entries FROM standing_versions")
            return {"standings": [tuple(r) for r in rows], "versions": [tuple(v) for v in versions]}
    finally:
        await pool.close()


def run(database_url: str, *batches) -> dict:
    return asyncio.run(project(database_url, [[identity_board(BOARD, [GPU]), *PEOPLE], *batches]))


def test_each_user_stands_with_their_best_earliest_score_however_the_log_was_batched(database_url):
    apply_migrations(database_url)
    events = history()
    ann, bob, cy = (p.user_id for p in PEOPLE)

    together = run(database_url, events)
    one_by_one = run(database_url, *([e] for e in events))

    assert together == one_by_one
    assert together["standings"] == [(ann, 2, 5e-6, 4), (bob, 3, 5e-6, 1), (cy, 5, 7e-6, 1)]
    # the version is the sequence of the last event that touched the board: the same whatever the batching
    assert together["versions"] == [(len(events) + 4 - 1, 3)]
    # the scorer's own best table picks by the same rules
    scored = [e for e in events if isinstance(e, ScoreComputed)]
    entries = [(BoardEntry(e.user_id, e.user_name, e.score, e.submission_id), e.submitted_at) for e in scored]
    assert [(b.user_id, b.submission_id) for b, _ in best_per_user(entries)] == [
        (s[0], s[1]) for s in together["standings"]]


def test_deleted_hacked_and_withdrawn_scores_leave_and_the_next_best_stands(database_url):
    apply_migrations(database_url)
    events = history()
    ann, bob, cy = (p.user_id for p in PEOPLE)
    revised = ScoreRevised(rejudge_id="r1", submission_id=5, leaderboard=BOARD, gpu=GPU, user_id=cy,
                           user_name="bench2", run_id=f"5.{GPU}.public", score=None, previous_score=7e-6,
                           ranking_by="last", submitted_at=T0)
    # bob's fastest submission is found hacked: it finishes so, with the score its runs got
    hacked = [e if not isinstance(e, SubmissionFinished) else e.model_copy(update={"status": "hacked"})
              for e in submission_events(7, BOARD, GPU, PEOPLE[1], 4_000, T0 + timedelta(minutes=7))]
    fate = [SubmissionDeleted(submission_id=2, user_id=ann), revised]

    after = run(database_url, events + hacked, fate)
    together = run(database_url, events + hacked + fate)

    # ann's equal later score stands in for the deleted one; bob keeps his honest best; cy's score was withdrawn
    assert after["standings"] == [(bob, 3, 5e-6, 1), (ann, 4, 5e-6, 3)]
    assert after["versions"][0][1] == 2
    assert together == after

    gone = run(database_url, events, [LeaderboardDeleted(name=BOARD)])
    assert gone == {"standings": [], "versions": []}
