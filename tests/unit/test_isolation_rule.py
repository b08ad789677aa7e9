"""The isolation rule of the scorer (services/scorer/scoring.py, rescoring.py), pure: a ranked score needs both its
runs fully isolated, outside development mode; a result from before runners reported a level judges as it did."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.core.presentation import reports
from services.dispatcher.planning import plan_runs
from services.scorer import rescoring, scoring
from services.scorer.scoring import RunVerdict
from tests.unit.test_reports import RESULTS
from tests.unit.test_scoring import ranked_result

PLANNED = plan_runs(9, "leaderboard", ["H100"])
PUBLIC, SECRET = PLANNED


def verdict(isolation: str, development: bool = False, mean_ns: float = 1500) -> RunVerdict:
    result = ranked_result(mean_ns).model_copy(update={"isolation": isolation})
    return scoring.verdict_of(result, "leaderboard", "last", development)


def decide(public: RunVerdict, secret: RunVerdict) -> scoring.Decision:
    return scoring.decide("leaderboard", PLANNED, {PUBLIC.run_id: public, SECRET.run_id: secret})


def test_the_verdict_records_the_level_the_runner_reported_and_the_mode():
    judged = verdict("limits-only", development=True)
    assert (judged.passed, judged.isolation, judged.development) == (True, "limits-only", True)


@pytest.mark.parametrize(("public", "secret"), [("limits-only", "full"), ("full", "limits-only"),
                                                 ("limits-only", "limits-only")])
def test_a_run_not_fully_isolated_is_judged_but_not_ranked_and_says_why(public: str, secret: str):
    decision = decide(verdict(public), verdict(secret))

    assert decision.scores == []
    reason = ("not ranked on H100: this runner could not isolate the run (limits-only: resource limits without a "
              "user or namespaces of its own; such runs rank only in development mode)")
    assert decision.rejections == [scoring.GpuRejection("H100", reason)]
    assert (decision.status, decision.error) == ("failed", f"{reason}; submission will not appear on the leaderboard")


def test_any_level_but_full_counts_as_not_isolated():
    decision = decide(verdict("none"), verdict("full"))
    assert decision.scores == [] and "(none: resource limits" in decision.rejections[0].reason


def test_in_development_mode_it_ranks():
    decision = decide(verdict("limits-only", development=True), verdict("limits-only", development=True))
    assert (decision.status, decision.error, decision.rejections) == ("succeeded", None, [])
    assert [score.score for score in decision.scores] == [pytest.approx(1.5e-6)]


@pytest.mark.parametrize("level", ["full", ""])
def test_a_fully_isolated_run_and_one_from_before_levels_existed_rank(level: str):
    decision = decide(verdict(level), verdict(level))
    assert decision.status == "succeeded" and len(decision.scores) == 1


def test_a_failure_is_reported_before_the_isolation():
    failed = RunVerdict(passed=False, reason="2/3 tests passed; first failure: s: e")
    decision = decide(failed, verdict("limits-only"))
    assert decision.rejections[0].reason.startswith("ranked validation failed on H100")


def _judged(isolation: str, development: bool) -> rescoring.Judged:
    result = ranked_result(1500).model_copy(update={"isolation": isolation})
    return rescoring.Judged(
        submission_id=9, user_id="u", user_name="u", mode="leaderboard", submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
        planned=PLANNED, verdicts={run.run_id: verdict(isolation, development) for run in PLANNED},
        results={run.run_id: result for run in PLANNED})


def test_a_rescore_in_the_same_mode_changes_nothing():
    for isolation, development in (("limits-only", False), ("limits-only", True), ("full", False), ("", False)):
        changes, _ = rescoring.revisions(_judged(isolation, development), "last", None, None, development)
        assert changes == [], (isolation, development)


def test_a_rescore_without_development_mode_takes_off_what_it_ranked():
    [change], verdicts = rescoring.revisions(_judged("limits-only", True), "last", None, None, development=False)
    assert change.before is not None and change.after is None
    assert change.reason.startswith("not ranked on H100: this runner could not isolate the run (limits-only")
    assert not any(v.development for v in verdicts.values())


def test_a_rescore_in_development_mode_ranks_what_was_refused():
    [change], _ = rescoring.revisions(_judged("limits-only", False), "last", None, None, development=True)
    assert change.before is None and change.after is not None


@pytest.mark.parametrize(("level", "marked"), [("limits-only", True), ("full", False), ("", False)])
def test_the_report_of_a_run_not_fully_isolated_says_so(level: str, marked: bool):
    result = RESULTS["leaderboard"] | ({"isolation": level} if level else {})
    text = reports.report("cpu", "local", "leaderboard", secret=False, result=result)
    note = ("⚠ Isolation: limits-only. This runner confined the run by resource limits only, without a user and "
            "namespaces of its own; such a run is ranked only on a platform in development mode.")
    assert (note in text) is marked
    assert ("Isolation" in text) is marked


def test_the_mode_is_recorded_only_where_it_decides():
    assert verdict("full", development=True) == verdict("full", development=False)
    assert verdict("", development=True) == verdict("", development=False)
    assert verdict("limits-only", development=True) != verdict("limits-only", development=False)
