"""The standings projection (migration 0030) through the ledger's own code: each (board, GPU, user) holds the best of
what still stands, whatever order or batching the events came in (the scorer's own best table is held to the same
standings in tests/service/test_scorer_standings.py)."""

from __future__ import annotations

import asyncio
import random
import sys
from datetime import timedelta
from pathlib import Path

from schemas.events import (
    LeaderboardDeleted,
    ScoreComputed,
    SubmissionAccepted,
    SubmissionDeleted,
    SubmissionFinished,
    UserRenamed,
)
from schemas.operations_events import ScoreRevised
from schemas.precheck_events import PrecheckCleared, PrecheckFinding, PrecheckVerdict, SubmissionReinstated
from services.kit.db import apply_migrations, create_pool
from services.ledger.repository import project_batch
from services.ranking.rules import SUBMISSION_STANDS, best_first
from tests.support.platform import identity_board

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from ranked_events import T0, ranked_history, submission_events, users  # noqa: E402

BOARD, GPU = "standing", "H100"
PEOPLE = users(3, first_id=500)
# Each user's best standing score and how many stand, read straight from every score (services/ranking/rules.py).
DEFINITION = f"""
SELECT user_id, submission_id, score, eligible_runs FROM (
    SELECT DISTINCT ON (sc.leaderboard_id, sc.gpu, sc.user_id) sc.user_id, sc.submission_id, sc.score,
           sc.submitted_at, count(*) OVER (PARTITION BY sc.leaderboard_id, sc.gpu, sc.user_id) AS eligible_runs
    FROM scores sc JOIN submissions s ON s.id = sc.submission_id WHERE {SUBMISSION_STANDS}
    ORDER BY sc.leaderboard_id, sc.gpu, sc.user_id, {best_first("sc")}) AS best
ORDER BY score, submitted_at, submission_id
"""


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
                               "standings, standing_versions, precheck_verdicts, event_archive RESTART IDENTITY")
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
            # however the ledger got there (recomputed or grown step by step), the standings are the definition
            assert [tuple(r) for r in rows] == [tuple(r) for r in await conn.fetch(DEFINITION)]
            versions = await conn.fetch("SELECT version, entries FROM standing_versions")
            names = await conn.fetch("SELECT user_id, user_name FROM standings ORDER BY user_id")
            verdicts = await conn.fetch("SELECT submission_id, outcome, rules, cleared_by FROM precheck_verdicts "
                                        "ORDER BY submission_id")
            return {"standings": [tuple(r) for r in rows], "versions": [tuple(v) for v in versions],
                    "names": [tuple(n) for n in names], "verdicts": [tuple(v) for v in verdicts]}
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
    assert gone == {"standings": [], "versions": [], "names": [], "verdicts": []}


def hacked_then_cleared(submission_id: int, who, mean_ns: float):
    """A submission the pre-check marked hacked (the scorer holds its score back), then an admin's clearing: the scorer
    reinstates it and its first score comes as a revision from no score."""
    at = T0 + timedelta(minutes=submission_id)
    finding = PrecheckFinding(rule="timer-patch", severity="high", message="reassigns a timer", line=3)
    verdict = PrecheckVerdict(outcome="hacked", findings=[finding], detail="marked hacked: timer-patch")
    life = []
    for event in submission_events(submission_id, BOARD, GPU, who, mean_ns, at):
        if isinstance(event, SubmissionAccepted):
            life.append(event.model_copy(update={"precheck": verdict}))
        elif isinstance(event, SubmissionFinished):
            life.append(event.model_copy(update={"status": "hacked"}))
        elif not isinstance(event, ScoreComputed):
            life.append(event)
    clearing = [
        PrecheckCleared(submission_id=submission_id, cleared_by="admin", reason="false positive", change_id="c1"),
        SubmissionReinstated(submission_id=submission_id, status="succeeded", rejudge_id="r2"),
        ScoreRevised(rejudge_id="r2", submission_id=submission_id, leaderboard=BOARD, gpu=GPU, user_id=who.user_id,
                     user_name=who.user_name, run_id=f"{submission_id}.{GPU}.public", score=mean_ns / 1e9,
                     previous_score=None, ranking_by="last", submitted_at=at),
    ]
    return life, clearing


def test_a_hacked_submission_stands_once_cleared_reinstated_and_scored(database_url):
    apply_migrations(database_url)
    events = history()
    ann, bob, cy = (p.user_id for p in PEOPLE)
    life, clearing = hacked_then_cleared(7, PEOPLE[1], 4_000)

    held = run(database_url, events + life)
    # the verdict of the admission is the admins' record; the hacked submission does not stand
    assert held["verdicts"] == [(7, "hacked", ["timer-patch"], None)]
    assert (bob, 3, 5e-6, 1) in held["standings"]

    after = run(database_url, events + life, clearing)
    one_by_one = run(database_url, events + life, *([e] for e in clearing))
    # the revision may reach the ledger before the reinstatement: the submission stands once both are in
    revision_first = run(database_url, events + life, [clearing[2]], [clearing[0], clearing[1]])
    assert after["standings"][0] == (bob, 7, 4e-6, 2)
    assert after["verdicts"] == [(7, "hacked", ["timer-patch"], "admin")]
    assert after == one_by_one == revision_first
    assert revision_first["standings"][0] == (bob, 7, 4e-6, 2)


def test_a_renamed_user_stands_under_the_new_name_and_the_board_version_moves(database_url):
    apply_migrations(database_url)
    events = history()
    ann = PEOPLE[0].user_id
    renamed = UserRenamed(user_id=ann, user_name="ann-renamed", change_id="c2")

    before = run(database_url, events)
    after = run(database_url, events, [renamed])
    together = run(database_url, events + [renamed])

    assert dict(before["names"])[ann] == PEOPLE[0].user_name
    assert dict(after["names"])[ann] == "ann-renamed"
    # gateways key their cached rankings by the version: the rename is the board's latest change
    assert after["versions"] == [(4 + len(events) + 1, before["versions"][0][1])]  # the rename's stream sequence
    assert together == after


def test_a_score_for_a_board_that_is_gone_is_dropped_and_the_ledger_goes_on(database_url):
    """A run that finishes as its board is deleted is scored after the purge: it has no board to stand on. Before,
    the score's NOT NULL board id failed the whole batch, and the ledger could never get past it."""
    apply_migrations(database_url)
    events = history()
    orphan = submission_events(8, "gone", GPU, PEOPLE[2], 1_000, T0 + timedelta(minutes=8))
    revised = ScoreRevised(rejudge_id="r2", submission_id=8, leaderboard="gone", gpu=GPU, user_id=PEOPLE[2].user_id,
                           user_name="bench2", run_id=f"8.{GPU}.public", score=2e-6, previous_score=1e-6,
                           ranking_by="last", submitted_at=T0)

    with_orphan = run(database_url, events, orphan, [revised])

    assert with_orphan == run(database_url, events)


def test_a_long_history_cut_anywhere_gives_the_standings_the_definition_gives(database_url):
    """Steps that only add scores grow each standing from the scores they recorded; steps that take one away
    recompute it. Random cuts of a long history, with deletions and a hacked finish among it, mix both."""
    apply_migrations(database_url)
    rng = random.Random(7)
    people = users(3, first_id=500)
    events = [e for events_of in ranked_history(120, people, BOARD, GPU, seed=3) for e in events_of]
    for submission_id in rng.sample(range(1, 121), 15):  # each deleted some time after it finished
        finished = next(i for i, e in enumerate(events)
                        if isinstance(e, SubmissionFinished) and e.submission_id == submission_id)
        events.insert(rng.randrange(finished + 1, len(events) + 1),
                      SubmissionDeleted(submission_id=submission_id, user_id=people[0].user_id))
    cuts = sorted(rng.sample(range(1, len(events)), 40))
    batches = [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)], strict=True)]

    cut = run(database_url, *batches)  # project() asserts the definition after it

    assert cut["standings"] == run(database_url, events)["standings"]
    assert len(cut["standings"]) == 3
