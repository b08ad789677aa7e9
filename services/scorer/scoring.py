"""Pure judging: a run's verdict, a submission's outcome, scores and ranks (docs/quickstart.md;
docs/http-api.md "Job states")."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from schemas.contracts import FullResult
from schemas.events import PlannedRun
from services.scorer.fingerprints import differences, hardware_of, mismatch_reason

MAX_ERROR_CHARS = 500
RANKED_STAGES = ("test", "benchmark", "leaderboard")


class ScoreError(ValueError):
    pass


@dataclass(frozen=True)
class RunVerdict:
    passed: bool
    reason: str = ""
    timed_out: bool = False
    runner_error: bool = False
    score: float | None = None
    harness_version: str = ""
    hardware: dict[str, str] = field(default_factory=dict)  # the comparable fingerprint it was measured on
    isolation: str = ""  # how the runner confined it (FullResult.isolation); "" from a runner older than that field
    # A run that was not fully isolated, judged in development mode, where it may rank. Recorded with the verdict,
    # so that a rescore knows what was ranked under which mode.
    development: bool = False
    # A ranked run's benchmark means in ns, case by case, for the floor's review (services/scorer/floor.py).
    case_means_ns: list[float] = field(default_factory=list)


def score_of(result: dict[str, str], ranking_by: str) -> float:
    """The score in seconds from a leaderboard stage's result map."""
    count = int(result.get("benchmark-count", "0"))
    means = [float(result[f"benchmark.{i}.mean"]) / 1e9 for i in range(count)]
    if ranking_by == "last":
        if count != 1:
            raise ScoreError(f"Expected submission to have exactly one benchmark, got {count}.")
        return means[0]
    if not means:
        raise ScoreError("no benchmark results")
    if ranking_by == "mean":
        return sum(means) / len(means)
    if any(m <= 0 for m in means):
        raise ScoreError("a benchmark mean is not positive")
    return math.exp(sum(math.log(m) for m in means) / len(means))


def case_means_ns(result: dict[str, str]) -> list[float]:
    return [float(result[f"benchmark.{i}.mean"]) for i in range(int(result.get("benchmark-count", "0")))]


def _first_failure(result: dict[str, str], prefix: str) -> str:
    count = int(result.get(f"{prefix}-count", "0"))
    for i in range(count):
        if result.get(f"{prefix}.{i}.status") == "fail":
            return f"{result.get(f'{prefix}.{i}.spec', '')}: {result.get(f'{prefix}.{i}.error', '')}"
    return result.get("error", "")


def _stage_failure(stage: str, evaluation) -> str | None:
    compilation, run = evaluation.compilation, evaluation.run
    if compilation is not None and not compilation.success:
        return f"compilation failed (exit code {compilation.exit_code})"
    if run is None:
        return f"{stage} did not run"
    if not run.success:
        if run.exit_code == 114:
            return f"{stage} timed out"
        return f"{stage} crashed (exit code {run.exit_code})"
    if run.passed:
        return None
    if stage == "test":
        count = int(run.result.get("test-count", "0"))
        passed = sum(run.result.get(f"test.{i}.status") == "pass" for i in range(count))
        return f"{passed}/{count} tests passed; first failure: {_first_failure(run.result, 'test')}"
    return f"{stage} failed: {_first_failure(run.result, 'benchmark')}"


def verdict_of(result: FullResult, mode: str, ranking_by: str, development: bool = False) -> RunVerdict:
    """Judge one completed run (in `development` mode, see RunVerdict)."""
    if not result.success:
        return RunVerdict(passed=False, reason=result.error or "runner failed", runner_error=True)
    expected = RANKED_STAGES if mode in ("leaderboard", "private") else tuple(result.runs) or (mode,)
    harness = ""
    outputs: dict[str, dict[str, str]] = {}
    for stage in expected:
        evaluation = result.runs.get(stage)
        if evaluation is None:
            return RunVerdict(passed=False, reason=f"{stage} stage missing")
        failure = _stage_failure(stage, evaluation)
        if failure:
            return RunVerdict(passed=False, reason=failure, timed_out=failure.endswith("timed out"))
        assert evaluation.run is not None  # _stage_failure answers for a stage that did not run
        outputs[stage] = evaluation.run.result
        # The runner's account of the harness (runner/task/harness_choice.py) first: under an unprotected harness the
        # result channel's claim may be the submission's.
        harness = harness or evaluation.harness.get("version", "") or evaluation.run.result.get("harness-version", "")
    score, means = None, []
    if mode in ("leaderboard", "private"):
        try:
            score = score_of(outputs["leaderboard"], ranking_by)
            means = case_means_ns(outputs["leaderboard"])
        except (ScoreError, KeyError, ValueError) as exc:
            return RunVerdict(passed=False, reason=f"no score: {exc}")
    verdict = RunVerdict(passed=True, score=score, harness_version=harness, hardware=hardware_of(result.system),
                         isolation=result.isolation, case_means_ns=means)
    # the mode is recorded only where it decides, so an isolated run's verdict is the same in either mode
    return replace(verdict, development=True) if development and unisolated(verdict) else verdict


def failed_run_verdict(reason: str, detail: str) -> RunVerdict:
    if reason == "timeout":
        return RunVerdict(passed=False, reason="hard timeout reached", timed_out=True)
    return RunVerdict(passed=False, reason=f"{reason}: {detail}", runner_error=True)


@dataclass(frozen=True)
class GpuScore:
    gpu: str
    run_id: str
    score: float
    secret_score: float | None
    harness_version: str
    hardware: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class GpuRejection:
    gpu: str
    reason: str


@dataclass(frozen=True)
class Decision:
    status: str
    error: str | None
    scores: list[GpuScore] = field(default_factory=list)
    rejections: list[GpuRejection] = field(default_factory=list)


def one_line(text: str) -> str:
    return " ".join(text.split())[:MAX_ERROR_CHARS]


def unisolated(verdict: RunVerdict) -> bool:
    """A run its runner reported as not fully isolated: user code may have reached the runner, its result or the
    network. "" (from a runner older than the level) is judged as it was before the level existed, so that the
    history a replay or a rescore reads keeps its rankings (docs/security.md)."""
    return verdict.isolation not in ("full", "")


def isolation_refusal(gpu: str, verdicts: list[RunVerdict]) -> str | None:
    """Why a score may not rank on `gpu`, when one of its runs was not fully isolated outside development mode."""
    levels = sorted({v.isolation for v in verdicts if unisolated(v) and not v.development})
    if not levels:
        return None
    return (f"not ranked on {gpu}: this runner could not isolate the run ({', '.join(levels)}: resource limits "
            f"without a user or namespaces of its own; such runs rank only in development mode)")


def decide(mode: str, planned: list[PlannedRun], verdicts: dict[str, RunVerdict]) -> Decision:
    """The job outcome once every planned run has a verdict."""
    if any(v.timed_out for v in verdicts.values()):
        base_status = "timed_out"
    else:
        base_status = "failed"
    if mode != "leaderboard":
        problems = []
        for run in planned:
            verdict = verdicts[run.run_id]
            if not verdict.passed:
                label = "runner error" if verdict.runner_error else f"{mode} failed"
                problems.append(f"{label} on {run.gpu}: {verdict.reason}")
        if not problems:
            return Decision("succeeded", None)
        return Decision(base_status, one_line("; ".join(problems)))

    scores, rejections, problems = [], [], []
    for gpu in dict.fromkeys(run.gpu for run in planned):
        public = next(r for r in planned if r.gpu == gpu and not r.secret)
        secret = next((r for r in planned if r.gpu == gpu and r.secret), None)
        pv = verdicts[public.run_id]
        sv = verdicts[secret.run_id] if secret else RunVerdict(passed=False, reason="secret run missing")
        if pv.runner_error or sv.runner_error or pv.timed_out or sv.timed_out:
            reason = f"ranked validation did not complete all public and secret runs on {gpu}"
        elif not pv.passed:
            reason = f"ranked validation failed on {gpu} ({pv.reason})"
        elif not sv.passed:
            reason = f"secret validation failed on {gpu}"
        elif refusal := isolation_refusal(gpu, [pv, sv]):
            reason = refusal
        else:
            assert pv.score is not None  # verdict_of scores every ranked run that passes
            scores.append(GpuScore(gpu, public.run_id, pv.score, sv.score, pv.harness_version, pv.hardware))
            continue
        rejections.append(GpuRejection(gpu, reason))
        problems.append(reason)
    if not problems:
        return Decision("succeeded", None, scores, rejections)
    error = "; ".join(problems) + "; submission will not appear on the leaderboard"
    return Decision(base_status, one_line(error), scores, rejections)


@dataclass(frozen=True)
class BoardEntry:
    user_id: str
    user_name: str
    score: float
    submission_id: int


def competition_ranks(entries: list[BoardEntry]) -> list[tuple[int, BoardEntry]]:
    """Standard competition ranking of entries already sorted best first: ties share a rank (1, 1, 3)."""
    ranked, previous, rank = [], None, 0
    for position, entry in enumerate(entries, start=1):
        if entry.score != previous:
            rank, previous = position, entry.score
        ranked.append((rank, entry))
    return ranked


def hold_back(decision, references: dict[str, dict[str, str]]):
    """The decision with every score measured on hardware unlike its board's reference turned into a rejection."""
    kept, rejected = [], list(decision.rejections)
    for score in decision.scores:
        found = differences(references.get(score.gpu, {}), score.hardware)
        if found:
            rejected.append(GpuRejection(score.gpu, mismatch_reason(score.gpu, found)))
        else:
            kept.append(score)
    if len(kept) == len(decision.scores):
        return decision
    problems = [r.reason for r in rejected]
    error = one_line("; ".join(problems) + "; submission will not appear on the leaderboard")
    return replace(decision, status="failed", error=error, scores=kept, rejections=rejected)
