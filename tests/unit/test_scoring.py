"""Pure judging (services/scorer/scoring.py): scores (docs/quickstart.md), verdicts, job outcome
(docs/http-api.md "Job states"), ranks."""

from __future__ import annotations

import math

import pytest

from schemas.contracts import CompileResult, EvalResult, FullResult, RunResult
from schemas.events import PlannedRun
from services.dispatcher.planning import plan_runs
from services.scorer import scoring
from services.scorer.scoring import BoardEntry, RunVerdict, ScoreError

# ---------------------------------------------------------------------------------------------- builders


def bench(*means_ns: float) -> dict[str, str]:
    result = {"check": "pass", "benchmark-count": str(len(means_ns)), "harness-version": "h-2"}
    for i, mean in enumerate(means_ns):
        result |= {f"benchmark.{i}.spec": f"size: {i}", f"benchmark.{i}.status": "pass", f"benchmark.{i}.mean": str(mean)}
    return result


def case_results(statuses: str, errors: dict[int, str] | None = None) -> dict[str, str]:
    """`statuses` like "ppffp": one p(ass)/f(ail) per test case."""
    result = {"check": "fail" if "f" in statuses else "pass", "test-count": str(len(statuses))}
    for i, status in enumerate(statuses):
        result[f"test.{i}.spec"] = f"seed: {5236 + i}; size: 128"
        result[f"test.{i}.status"] = "pass" if status == "p" else "fail"
        if status == "f":
            result[f"test.{i}.error"] = (errors or {}).get(i, "mismatch found!")
    return result


def stage(result: dict[str, str] | None = None, *, passed: bool = True, success: bool = True, exit_code: int = 0,
          compiled: bool | None = None) -> EvalResult:
    compilation = None if compiled is None else CompileResult(success=compiled, exit_code=0 if compiled else 1)
    run = None if compiled is False else RunResult(
        success=success, passed=passed, exit_code=exit_code, result=result if result is not None else {"check": "pass"}
    )
    return EvalResult(start="2025-03-01T12:00:00Z", compilation=compilation, run=run)


def ranked_result(*means_ns: float, **replace: EvalResult) -> FullResult:
    runs = {
        "test": stage(case_results("pppp") | {"harness-version": "h-2"}),
        "benchmark": stage(bench(*means_ns)),
        "leaderboard": stage(bench(*means_ns)),
    }
    return FullResult(success=True, runs=runs | replace)


# ------------------------------------------------------------------------------------------------ score_of


def test_last_is_the_single_benchmark_mean_in_seconds() -> None:
    assert scoring.score_of(bench(1500), "last") == pytest.approx(1.5e-6)


@pytest.mark.parametrize("count", [0, 2, 3])
def test_last_requires_exactly_one_benchmark(count: int) -> None:
    with pytest.raises(ScoreError) as caught:
        scoring.score_of(bench(*[1000.0] * count), "last")
    assert str(caught.value) == f"Expected submission to have exactly one benchmark, got {count}."


def test_mean_is_the_arithmetic_mean() -> None:
    assert scoring.score_of(bench(1000, 2000, 6000), "mean") == pytest.approx(3e-6)


def test_geom_is_the_geometric_mean() -> None:
    assert scoring.score_of(bench(1000, 4000), "geom") == pytest.approx(2e-6)
    assert scoring.score_of(bench(1000, 2000, 6000), "geom") == pytest.approx(12e-18 ** (1 / 3))


def test_geom_does_not_underflow() -> None:
    # A product of 400 values of 1e-9 s underflows to 0.0 in floating point; exp(mean(log)) does not.
    assert scoring.score_of(bench(*[1.0] * 400), "geom") == pytest.approx(1e-9)


@pytest.mark.parametrize("ranking_by", ["mean", "geom"])
def test_mean_and_geom_need_benchmarks(ranking_by: str) -> None:
    with pytest.raises(ScoreError):
        scoring.score_of(bench(), ranking_by)


def test_geom_rejects_non_positive_means() -> None:
    with pytest.raises(ScoreError):
        scoring.score_of(bench(1000, 0), "geom")


# ---------------------------------------------------------------------------------------------- verdict_of


def test_passing_test_run() -> None:
    verdict = scoring.verdict_of(FullResult(success=True, runs={"test": stage(case_results("ppp"))}), "test", "last")
    assert verdict.passed and verdict.score is None and verdict.reason == ""


def test_compile_failure() -> None:
    result = FullResult(success=True, runs={"benchmark": stage(compiled=False)})
    verdict = scoring.verdict_of(result, "benchmark", "last")
    assert verdict == RunVerdict(passed=False, reason="compilation failed (exit code 1)")


def test_timeout_exit_114() -> None:
    result = FullResult(success=True, runs={"test": stage({}, success=False, passed=False, exit_code=114)})
    verdict = scoring.verdict_of(result, "test", "last")
    assert not verdict.passed and verdict.timed_out and not verdict.runner_error
    assert verdict.reason == "test timed out"


def test_crash_is_not_a_timeout() -> None:
    result = FullResult(success=True, runs={"test": stage({}, success=False, passed=False, exit_code=-11)})
    verdict = scoring.verdict_of(result, "test", "last")
    assert verdict == RunVerdict(passed=False, reason="test crashed (exit code -11)")


def test_failed_tests_name_the_first_failure() -> None:
    result = FullResult(success=True, runs={
        "test": stage(case_results("pfpfp", {1: "mismatch found! at 3", 3: "later"}), passed=False, exit_code=112)
    })
    verdict = scoring.verdict_of(result, "test", "last")
    assert not verdict.passed and not verdict.timed_out
    assert verdict.reason == "3/5 tests passed; first failure: seed: 5237; size: 128: mismatch found! at 3"


def test_runner_failure() -> None:
    verdict = scoring.verdict_of(FullResult(success=False, error="could not fetch payload"), "test", "last")
    assert verdict == RunVerdict(passed=False, reason="could not fetch payload", runner_error=True)


def test_runner_failure_without_text() -> None:
    verdict = scoring.verdict_of(FullResult(success=False), "leaderboard", "last")
    assert verdict.runner_error and verdict.reason


def test_the_scores_harness_version_is_the_runners_account_over_the_result_channel() -> None:
    runner_says = {"kind": "problem", "version": "problem eval.py sha256:abc", "protected": "false"}
    test = stage(case_results("pppp") | {"harness-version": "kernelbot-examples 9 (claimed)"})
    result = ranked_result(1000, test=test.model_copy(update={"harness": runner_says}))
    assert scoring.verdict_of(result, "leaderboard", "last").harness_version == "problem eval.py sha256:abc"


def test_ranked_run_is_scored_from_the_leaderboard_stage() -> None:
    result = ranked_result(1000, 4000, leaderboard=stage(bench(2000, 8000)))
    verdict = scoring.verdict_of(result, "leaderboard", "geom")
    assert verdict.passed and verdict.score == pytest.approx(4e-6) and verdict.harness_version == "h-2"
    assert scoring.verdict_of(result, "private", "mean").score == pytest.approx(5e-6)


def test_ranked_run_with_a_failing_benchmark_stage() -> None:
    failing = bench(1000) | {"check": "fail", "benchmark.0.status": "fail", "benchmark.0.error": "too slow"}
    verdict = scoring.verdict_of(ranked_result(1000, benchmark=stage(failing, passed=False)), "leaderboard", "last")
    assert verdict == RunVerdict(passed=False, reason="benchmark failed: size: 0: too slow")


def test_ranked_run_that_stopped_early_misses_a_stage() -> None:
    result = FullResult(success=True, runs={"test": stage(case_results("pp"))})
    verdict = scoring.verdict_of(result, "leaderboard", "last")
    assert not verdict.passed and verdict.reason == "benchmark stage missing"


def test_ranked_run_with_last_and_several_benchmarks_has_no_score() -> None:
    verdict = scoring.verdict_of(ranked_result(1000, 2000), "leaderboard", "last")
    assert not verdict.passed and verdict.score is None
    assert "Expected submission to have exactly one benchmark, got 2." in verdict.reason


def test_failed_run_verdicts() -> None:
    assert scoring.failed_run_verdict("timeout", "") == RunVerdict(
        passed=False, reason="hard timeout reached", timed_out=True
    )
    lost = scoring.failed_run_verdict("lost", "job vanished")
    assert not lost.passed and lost.runner_error and not lost.timed_out and "job vanished" in lost.reason


# -------------------------------------------------------------------------------------------------- decide

PASS = RunVerdict(passed=True)


def scored(score: float) -> RunVerdict:
    return RunVerdict(passed=True, score=score, harness_version="h-2")


def assert_one_line(error: str | None) -> None:
    assert error and "\n" not in error and len(error) <= 500


@pytest.mark.parametrize("mode", ["test", "benchmark", "profile"])
def test_non_ranked_success(mode: str) -> None:
    planned = plan_runs(1, mode, ["H100"])
    decision = scoring.decide(mode, planned, {planned[0].run_id: PASS})
    assert (decision.status, decision.error, decision.scores, decision.rejections) == ("succeeded", None, [], [])


def test_non_ranked_failed_tests() -> None:
    planned = plan_runs(1, "test", ["H100"])
    verdict = RunVerdict(passed=False, reason="3/5 tests passed; first failure: seed: 5236; size: 128: mismatch found!")
    decision = scoring.decide("test", planned, {planned[0].run_id: verdict})
    assert decision.status == "failed"
    assert decision.error == "test failed on H100: 3/5 tests passed; first failure: seed: 5236; size: 128: mismatch found!"


def test_non_ranked_compile_failure() -> None:
    planned = plan_runs(1, "benchmark", ["H100"])
    verdict = scoring.verdict_of(FullResult(success=True, runs={"benchmark": stage(compiled=False)}), "benchmark", "last")
    decision = scoring.decide("benchmark", planned, {planned[0].run_id: verdict})
    assert (decision.status, decision.error) == ("failed", "benchmark failed on H100: compilation failed (exit code 1)")


def test_non_ranked_runner_error() -> None:
    planned = plan_runs(1, "test", ["H100"])
    verdict = scoring.verdict_of(FullResult(success=False, error="CUDA driver missing"), "test", "last")
    decision = scoring.decide("test", planned, {planned[0].run_id: verdict})
    assert (decision.status, decision.error) == ("failed", "runner error on H100: CUDA driver missing")


def test_non_ranked_timeout() -> None:
    planned = plan_runs(1, "profile", ["H100"])
    decision = scoring.decide("profile", planned, {planned[0].run_id: scoring.failed_run_verdict("timeout", "")})
    assert (decision.status, decision.error) == ("timed_out", "profile failed on H100: hard timeout reached")


def test_non_ranked_several_gpus_join_with_semicolons() -> None:
    planned = plan_runs(1, "test", ["H100", "T4", "A100"])
    verdicts = {
        planned[0].run_id: RunVerdict(passed=False, reason="1/2 tests passed; first failure: a: b"),
        planned[1].run_id: PASS,
        planned[2].run_id: RunVerdict(passed=False, reason="boom", runner_error=True),
    }
    decision = scoring.decide("test", planned, verdicts)
    assert decision.status == "failed"
    assert decision.error == "test failed on H100: 1/2 tests passed; first failure: a: b; runner error on A100: boom"


def test_error_is_one_line_of_at_most_500_chars() -> None:
    planned = plan_runs(1, "test", ["H100"])
    reason = "first line\nsecond\tline\r\n" + "x" * 2000
    decision = scoring.decide("test", planned, {planned[0].run_id: RunVerdict(passed=False, reason=reason)})
    assert_one_line(decision.error)
    assert decision.error.startswith("test failed on H100: first line second line x")


def test_ranked_success_scores_with_the_public_run() -> None:
    planned = plan_runs(9, "leaderboard", ["H100"])
    public, secret = planned
    decision = scoring.decide("leaderboard", planned, {public.run_id: scored(2.0), secret.run_id: scored(3.0)})
    assert (decision.status, decision.error, decision.rejections) == ("succeeded", None, [])
    assert decision.scores == [scoring.GpuScore("H100", public.run_id, 2.0, 3.0, "h-2")]


def test_ranked_public_failure() -> None:
    planned = plan_runs(9, "leaderboard", ["H100"])
    public, secret = planned
    decision = scoring.decide("leaderboard", planned, {
        public.run_id: RunVerdict(passed=False, reason="2/3 tests passed; first failure: s: e"),
        secret.run_id: scored(1.0),
    })
    assert decision.status == "failed"
    assert decision.error == (
        "ranked validation failed on H100 (2/3 tests passed; first failure: s: e); "
        "submission will not appear on the leaderboard"
    )
    assert decision.scores == []
    assert decision.rejections == [
        scoring.GpuRejection("H100", "ranked validation failed on H100 (2/3 tests passed; first failure: s: e)")
    ]


def test_ranked_secret_failure_does_not_reveal_the_reason() -> None:
    planned = plan_runs(9, "leaderboard", ["H100"])
    public, secret = planned
    decision = scoring.decide("leaderboard", planned, {
        public.run_id: scored(1.0),
        secret.run_id: RunVerdict(passed=False, reason="secret seed 1234: mismatch"),
    })
    assert decision.status == "failed"
    assert decision.error == "secret validation failed on H100; submission will not appear on the leaderboard"
    assert "1234" not in decision.error
    assert decision.scores == []
    assert decision.rejections == [scoring.GpuRejection("H100", "secret validation failed on H100")]


def test_ranked_timeout_status() -> None:
    planned = plan_runs(9, "leaderboard", ["H100"])
    public, secret = planned
    decision = scoring.decide("leaderboard", planned, {
        public.run_id: scored(1.0), secret.run_id: scoring.failed_run_verdict("timeout", ""),
    })
    assert decision.status == "timed_out"
    assert_one_line(decision.error)


def test_ranked_several_gpus_keep_the_passing_ones() -> None:
    planned = plan_runs(9, "leaderboard", ["H100", "T4"])
    verdicts = {run.run_id: scored(1.0) for run in planned}
    t4_secret = next(run for run in planned if run.gpu == "T4" and run.secret)
    verdicts[t4_secret.run_id] = RunVerdict(passed=False, reason="x")
    decision = scoring.decide("leaderboard", planned, verdicts)
    assert decision.status == "failed"
    assert [s.gpu for s in decision.scores] == ["H100"]
    assert [r.gpu for r in decision.rejections] == ["T4"]
    assert decision.error == "secret validation failed on T4; submission will not appear on the leaderboard"


def test_ranked_errors_stay_one_line() -> None:
    gpus = [f"GPU{i}" for i in range(30)]
    planned = plan_runs(9, "leaderboard", gpus)
    verdicts = {run.run_id: RunVerdict(passed=False, reason="a\nb " * 50) for run in planned}
    assert_one_line(scoring.decide("leaderboard", planned, verdicts).error)


def test_planned_runs_are_taken_as_given() -> None:
    # decide() pairs runs by GPU and secrecy, not by id shape.
    planned = [PlannedRun(run_id="a", gpu="H100", mode="leaderboard"),
               PlannedRun(run_id="b", gpu="H100", mode="private", secret=True)]
    decision = scoring.decide("leaderboard", planned, {"a": scored(5.0), "b": scored(6.0)})
    assert decision.scores[0].run_id == "a" and decision.scores[0].score == 5.0


# --------------------------------------------------------------------------------------------------- ranks


def entries(*scores: float) -> list[BoardEntry]:
    return [BoardEntry(f"u{i}", f"user{i}", s, 100 + i) for i, s in enumerate(scores)]


@pytest.mark.parametrize(("scores", "ranks"), [
    ((1.0, 1.0, 2.0), [1, 1, 3]),
    ((1.0, 2.0, 2.0, 2.0, 5.0), [1, 2, 2, 2, 5]),
    ((1.0, 2.0, 3.0), [1, 2, 3]),
    ((4.0, 4.0, 4.0), [1, 1, 1]),
    ((), []),
])
def test_competition_ranking(scores: tuple[float, ...], ranks: list[int]) -> None:
    ranked = scoring.competition_ranks(entries(*scores))
    assert [rank for rank, _ in ranked] == ranks
    assert [entry for _, entry in ranked] == entries(*scores)


def test_ranks_use_exact_scores() -> None:
    close = math.nextafter(1.0, 2.0)
    assert [rank for rank, _ in scoring.competition_ranks(entries(1.0, close))] == [1, 2]
