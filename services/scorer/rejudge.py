"""Rescoring a board from the stored RunCompleted results under the rule now in force (one transaction)."""

from __future__ import annotations

from collections import defaultdict

import asyncpg

from schemas.contracts import FullResult
from schemas.envelope import Event
from schemas.events import LeaderboardRankChanged, PlannedRun, RankEntry
from schemas.operations_events import RejudgeCompleted, RejudgeRequested, ScoreRevised
from services.scorer import best, best_repository, repository, rescoring
from services.scorer.best_repository import Key
from services.scorer.scoring import BoardEntry


def _judged(row, verdicts: dict, results: dict) -> rescoring.Judged:
    planned = [PlannedRun.model_validate(p) for p in row["planned_runs"]]
    return rescoring.Judged(
        submission_id=row["submission_id"], user_id=row["user_id"], user_name=row["user_name"], mode=row["mode"],
        submitted_at=row["submitted_at"], planned=planned, verdicts=verdicts,
        results={r.run_id: FullResult.model_validate(results[r.run_id]) for r in planned if r.run_id in results},
        hold=row["precheck_hold"],
    )


def _revised(request: RejudgeRequested, board: str, ranking_by: str, change: rescoring.Revision) -> ScoreRevised:
    current = change.after or change.before
    judged = change.submission
    return ScoreRevised(
        rejudge_id=request.rejudge_id, submission_id=judged.submission_id, leaderboard=board, gpu=change.gpu,
        user_id=judged.user_id, user_name=judged.user_name, run_id=current.run_id,
        score=change.after.score if change.after else None,
        secret_score=change.after.secret_score if change.after else None,
        previous_score=change.before.score if change.before else None, ranking_by=ranking_by,
        harness_version=current.harness_version, submitted_at=judged.submitted_at, reason=change.reason,
        correlation_id=request.rejudge_id, causation_id=request.event_id,
    )


async def rebuild_board(conn: asyncpg.Connection, request: RejudgeRequested, board: str, gpu: str,
                        keys: list[Key] | None = None) -> list[Event]:
    """Refresh a board's best entries from the scores as revised (`keys`, or all of the board's); a rank change
    when its top moved, named after the rejudge."""
    if keys is None:
        keys = await best_repository.board_gpu_keys(conn, board, gpu)

    def change(board: str, gpu: str, top: list[RankEntry], previous: list[RankEntry]) -> LeaderboardRankChanged:
        return LeaderboardRankChanged(
            event_id=f"LeaderboardRankChanged:{board}:{gpu}:rejudge:{request.rejudge_id}", leaderboard=board,
            gpu=gpu, top=top, previous_top=previous, caused_by_submission=0, correlation_id=request.rejudge_id,
            causation_id=request.event_id)

    return await best.refresh(conn, [key for key in keys if key[:2] == (board, gpu)], change)


async def rescore(conn: asyncpg.Connection, request: RejudgeRequested, development: bool = False) -> list[Event]:
    """Judge every ranked submission of the board again from its stored results, in `development` mode or not;
    the events that records."""
    await repository.lock_boards(conn)
    rows = await repository.board_submissions(conn, request.leaderboard)
    ids = [r["submission_id"] for r in rows]
    verdicts = await repository.verdicts_of(conn, ids)
    results = await repository.completed_results(conn, ids)
    board = rows[0]["leaderboard"] if rows else request.leaderboard
    gpus = {request.gpu} if request.gpu else None
    touched: set[str] = set(gpus or ())
    events: list[Event] = []
    all_judged = [_judged(row, verdicts.get(row["submission_id"], {}), results) for row in rows]
    references = None
    if request.same_hardware:  # scores measured on other hardware than the board's are not compared: withdrawn
        references = rescoring.references_of(all_judged, await repository.board_hardware(conn, board))
    for row, judged in zip(rows, all_judged, strict=True):
        ranking_by = request.ranking_by or row["ranking_by"]
        changes, new_verdicts = rescoring.revisions(judged, ranking_by, gpus, references, development)
        for run_id, verdict in new_verdicts.items():
            if verdict != judged.verdicts.get(run_id):
                await repository.set_verdict(conn, run_id, verdict)
        events.extend(_revised(request, board, ranking_by, change) for change in changes)
        touched.update(run.gpu for run in judged.planned if gpus is None)
    revised = len(events)
    await best_repository.record(conn, events)
    await repository.settle_cleared(conn, [r["submission_id"] for r in rows if r["precheck_hold"] == "cleared"])
    for gpu in sorted(touched):  # every entry of the board refreshed: a rescore also mends what went astray
        events.extend(await rebuild_board(conn, request, board, gpu))
    events.append(RejudgeCompleted(rejudge_id=request.rejudge_id, leaderboard=board, gpu=request.gpu,
                                   action=request.action, submissions=len(rows), revised=revised,
                                   correlation_id=request.rejudge_id, causation_id=request.event_id))
    return events


async def standing(conn: asyncpg.Connection, board: str, gpu: str) -> list[BoardEntry]:
    """The whole board as the scorer holds it, best first."""
    return await repository.top(conn, board, gpu, None)


async def judge_reruns(conn: asyncpg.Connection, submission_id: int, same_hardware: bool = False) -> list[Event]:
    """Revise a submission's scores once every run of a rerun of it has ended (the caller holds its lock); with
    `same_hardware`, a rerun measured on hardware unlike its board's reference does not score."""
    events: list[Event] = []
    reruns = await repository.open_reruns(conn, submission_id)
    if reruns:
        # One rerun's revision at a time, as a rescore's: the rank change of each says what the board was before it.
        await repository.lock_boards(conn)
    for rejudge_id, rerun_runs in reruns:
        found = await repository.submission_and_verdicts(conn, submission_id)
        if found is None or any(run.run_id not in found[2] for run in rerun_runs):
            continue
        row, planned, verdicts = found
        gpus = {run.gpu for run in rerun_runs}
        merged = [run for run in planned if run.gpu not in gpus] + rerun_runs
        before = _judged(row, verdicts, {})
        after = rescoring.Judged(**{**before.__dict__, "planned": merged})
        old = rescoring.scores_of(before, verdicts, gpus)
        references = await repository.board_hardware(conn, row["leaderboard"]) if same_hardware else None
        new, mismatched = rescoring.comparable(rescoring.scores_of(after, verdicts, gpus), references)
        reasons = rescoring.rejection_reasons(after, verdicts) | mismatched
        await repository.finish_rerun(conn, rejudge_id, submission_id, merged)
        request = RejudgeRequested(rejudge_id=rejudge_id, leaderboard=row["leaderboard"], action="rerun",
                                   event_id=f"RejudgeRequested:{rejudge_id}")
        revised = [_revised(request, row["leaderboard"], row["ranking_by"],
                            rescoring.Revision(after, gpu, old.get(gpu), new.get(gpu), reasons.get(gpu, "")))
                   for gpu in sorted(gpus) if old.get(gpu) != new.get(gpu)]
        events.extend(revised)
        keys = await best_repository.record(conn, revised)
        rerun = RejudgeRequested(rejudge_id=f"{rejudge_id}:{submission_id}", leaderboard=row["leaderboard"],
                                 action="rerun", event_id=request.event_id)
        for gpu in sorted(gpus):
            events.extend(await rebuild_board(conn, rerun, row["leaderboard"], gpu, keys))
    return events


async def hardware_spread(conn: asyncpg.Connection, board: str) -> dict[str, list[dict[str, str]]]:
    """Per GPU, the distinct hardware (comparable fingerprints) its ranked scores were measured on."""
    rows = await repository.board_submissions(conn, board)
    verdicts = await repository.verdicts_of(conn, [r["submission_id"] for r in rows])
    spread: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        judged = _judged(row, verdicts.get(row["submission_id"], {}), {})
        for gpu, score in rescoring.scores_of(judged, judged.verdicts, None).items():
            if score.hardware and score.hardware not in spread[gpu]:
                spread[gpu].append(score.hardware)
    return dict(spread)
