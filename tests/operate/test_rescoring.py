"""Pure rejudging logic: rescored verdicts, what a rescore revises, the rank moves a dry run prints."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas.contracts import FullResult, SystemInfo
from schemas.events import PlannedRun
from services.kit.jsonlog import JsonFormatter, correlation
from services.operate.rejudging import rank_moves
from services.scorer import rescoring, scoring
from services.scorer.scoring import BoardEntry
from tests.operate.conftest import stage

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PLANNED = [PlannedRun(run_id="1.H100.public", gpu="H100", mode="leaderboard"),
           PlannedRun(run_id="1.H100.secret", gpu="H100", mode="private", secret=True)]


def judged(means_ns: list[float], rule: str = "mean") -> rescoring.Judged:
    result = FullResult(success=True, system=SystemInfo(gpu="H100"),
                        runs={s: stage(s, means_ns) for s in ("test", "benchmark", "leaderboard")})
    verdicts = {run.run_id: scoring.verdict_of(result, run.mode, rule) for run in PLANNED}
    return rescoring.Judged(submission_id=1, user_id="u", user_name="ada", mode="leaderboard", submitted_at=T0,
                            planned=PLANNED, verdicts=verdicts, results={run.run_id: result for run in PLANNED})


def test_a_new_rule_revises_the_score_from_the_stored_results():
    changes, verdicts = rescoring.revisions(judged([1_000.0, 100_000.0]), "geom", None)
    [change] = changes
    assert change.before.score == 50.5e-6 and abs(change.after.score - 10e-6) < 1e-15
    assert verdicts["1.H100.public"].score == change.after.score


def test_the_same_rule_revises_nothing_and_a_rule_the_results_cannot_meet_takes_the_score_off():
    assert rescoring.revisions(judged([1_000.0, 100_000.0]), "mean", None)[0] == []
    [change] = rescoring.revisions(judged([1_000.0, 100_000.0]), "last", None)[0]
    assert change.after is None and "exactly one benchmark" in change.reason


def test_a_gpu_filter_leaves_other_gpus_alone():
    assert rescoring.revisions(judged([1_000.0, 100_000.0]), "geom", {"T4"})[0] == []


def test_rank_moves_list_who_moves_and_who_leaves():
    before = [BoardEntry("b", "bob", 1.0, 2), BoardEntry("a", "alice", 2.0, 1), BoardEntry("c", "cy", 3.0, 3)]
    after = [BoardEntry("a", "alice", 0.5, 1), BoardEntry("b", "bob", 1.0, 2)]
    moves = rank_moves(before, after)
    assert [(m.user_name, m.before, m.after) for m in moves] == [
        ("alice", (2, 2.0), (1, 0.5)), ("bob", (1, 1.0), (2, 1.0)), ("cy", (3, 3.0), None)]


def test_log_lines_are_json_with_the_correlation_id():
    import json
    import logging

    record = logging.LogRecord("kernelbot.x", logging.WARNING, __file__, 1, "run %s lost", ("7.H100",), None)
    token = correlation.set("7")
    try:
        line = json.loads(JsonFormatter("scorer").format(record))
    finally:
        correlation.reset(token)
    assert (line["message"], line["correlation_id"], line["service"], line["level"]) == (
        "run 7.H100 lost", "7", "scorer", "warning")
