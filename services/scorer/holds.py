"""Scores held for review by the floor (services/scorer/floor.py), and the clearing of a false hold.

A submission with a held score is held whole (`scorer_submissions.precheck_hold = 'review'`): none of its scores is
published, so it never ranks, and a rescore leaves it off the board as it does a pre-check hold. An admin clears it
through the pre-check's review path (PrecheckCleared): the hold becomes `cleared` and a rescore of its board ranks
its scores, recorded as ScoreRevised like any other revision.
"""

from __future__ import annotations

import asyncpg

from schemas.envelope import Event
from schemas.operations_events import RejudgeRequested
from schemas.precheck_events import PrecheckCleared, ScoreHeld
from services.scorer import floor, floor_repository, repository
from services.scorer.scoring import Decision, RunVerdict, one_line

HELD = "review"


async def review(conn: asyncpg.Connection, leaderboard: str, planned, verdicts: dict[str, RunVerdict],
                 decision: Decision, rules: floor.FloorRules) -> dict[str, floor.Hold]:
    """The scores of `decision` the floor holds, by GPU."""
    held: dict[str, floor.Hold] = {}
    for score in decision.scores:
        public = next(run for run in planned if run.run_id == score.run_id)
        means = verdicts[score.run_id].case_means_ns
        # each read only where a rule would look at it: both cost a round trip on every judging
        best = await floor_repository.board_best(conn, leaderboard, score.gpu) if rules.best_fraction > 0 else None
        entries = (await floor_repository.board_case_means(conn, leaderboard, score.gpu)
                   if floor.compares_cases(means, public.floor_ns, rules) else [])
        measured = floor.Measured(score.gpu, score.score, means, public.floor_ns, best[0] if best else None,
                                  floor.per_case_median(entries, len(means)))
        found = floor.hold(measured, rules)
        if found is not None:
            held[score.gpu] = found
    return held


async def hold(conn: asyncpg.Connection, row, decision: Decision, held: dict[str, floor.Hold],
               tags: dict[str, str]) -> tuple[list[Event], str]:
    """Hold the submission: a ScoreHeld per held score, and the error its job finishes with."""
    await repository.set_hold(conn, row["submission_id"], HELD)
    events: list[Event] = [
        ScoreHeld(submission_id=row["submission_id"], leaderboard=row["leaderboard"], gpu=score.gpu,
                  user_id=row["user_id"], user_name=row["user_name"], run_id=score.run_id, score=score.score,
                  rule=held[score.gpu].rule, reason=held[score.gpu].reason, **tags)
        for score in decision.scores if score.gpu in held]
    reasons = "; ".join(h.reason for h in held.values())
    error = f"held for review: {reasons}; it ranks once an admin clears it"
    return events, one_line("; ".join(filter(None, [error, decision.error])))


def clear(row, event: PrecheckCleared) -> RejudgeRequested:
    """The rescore that ranks a cleared submission's scores (the caller marks it `cleared`)."""
    submission_id = row["submission_id"]
    return RejudgeRequested(
        rejudge_id=f"{row['leaderboard']}.hold-clear.{submission_id}.{event.change_id}",
        leaderboard=row["leaderboard"], action="rescore", ranking_by=row["ranking_by"],
        requested_by=event.cleared_by,
        reason=f"floor hold cleared for submission {submission_id}: {event.reason}".rstrip(": "),
        correlation_id=str(submission_id), causation_id=event.event_id)
