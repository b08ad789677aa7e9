"""One stage of a run: its plan (the cases, the harness's argv[1], the timeout), its case file, and its EvalResult
built from the process outcome. Shared by the stage loop of runner/stages/execute.py and the chain of
runner/stages/chained.py, so that a stage reads the same whichever way its process ran."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from runner.confinement.sandbox import RunSandbox
from runner.launching.process import ProcessOutcome
from runner.stages.timing import stage_timing
from runner.task.protocol import decode_output, judge_stage, parse_sample_lines, truncate_output
from runner.task.taskfile import render_case_file
from schemas.contracts import CaseValue, CompileResult, EvalResult, RunPayload, RunResult

SUCCESS_EXIT_CODES = (0, 112)


@dataclass(frozen=True)
class StagePlan:
    key: str  # result key: test, benchmark, leaderboard, profile.<i>
    harness_stage: str  # argv[1] of the harness; never "private"
    cases: list[dict[str, CaseValue]]
    timeout: int


def plan_stages(payload: RunPayload) -> list[StagePlan]:
    """The stages of a mode in chain order; `ranking_by: last` keeps only the last benchmark for timed stages."""
    timed_cases = payload.benchmarks[-1:] if payload.ranking_by == "last" else payload.benchmarks
    test = StagePlan("test", "test", payload.tests, payload.test_timeout)
    benchmark = StagePlan("benchmark", "benchmark", timed_cases, payload.benchmark_timeout)
    if payload.mode == "test":
        return [test]
    if payload.mode == "benchmark":
        return [benchmark]
    if payload.mode == "profile":
        return [StagePlan(f"profile.{i}", "profile", [payload.benchmarks[i]], payload.benchmark_timeout)
                for i in profiled_cases(payload)]
    return [test, benchmark, StagePlan("leaderboard", "leaderboard", timed_cases, payload.ranked_timeout)]


def profiled_cases(payload: RunPayload) -> list[int]:
    """The benchmark cases a profile run covers: the one its options choose, else every case."""
    index = payload.profile.benchmark_index if payload.profile else None
    if index is None:
        return list(range(len(payload.benchmarks)))
    if index >= len(payload.benchmarks):
        raise ValueError(f"benchmark_index {index} is out of range: the task has {len(payload.benchmarks)} "
                         f"benchmark cases")
    return [index]


def now() -> str:
    return datetime.now(UTC).isoformat()


def write_case_file(box: RunSandbox, plan: StagePlan) -> Path:
    case_file = box.base / f"{plan.key}.cases.txt"  # outside the run directory, beside it
    case_file.write_text(render_case_file(plan.cases), encoding="utf-8")
    os.chmod(case_file, 0o644)
    return case_file


def stage_ranks(plan: StagePlan) -> int:
    return max((int(size) for case in plan.cases if isinstance(size := case.get("world_size", 1), int)), default=1)


def stage_result(argv: list[str], plan: StagePlan, payload: RunPayload, outcome: ProcessOutcome,
                 compilation: CompileResult | None, start: str, harness_info: dict[str, str] | None,
                 end: str | None = None) -> EvalResult:
    """A stage's EvalResult from its process outcome (a lone process's, or its share of a chain's)."""
    # Upstream's CUDA harness times only the last case in `leaderboard`, whatever ranking_by says.
    expected = None if payload.lang == "cu" and plan.harness_stage == "leaderboard" else len(plan.cases)
    if outcome.timed_out:
        result, passed = {}, False
    else:
        verdict = judge_stage(decode_output(bytes(outcome.result.data)), plan.harness_stage, expected)
        result, passed = verdict.result, verdict.passed
        if outcome.result.overflowed:
            result["error"], passed = "result channel overflow", False
    run = RunResult(
        success=not outcome.timed_out and outcome.exit_code in SUCCESS_EXIT_CODES,
        passed=passed,
        command=shlex.join(argv),
        stdout=truncate_output(decode_output(bytes(outcome.stdout.data)), extra_lines=outcome.stdout.dropped_lines),
        stderr=truncate_output(decode_output(bytes(outcome.stderr.data)), extra_lines=outcome.stderr.dropped_lines),
        exit_code=outcome.exit_code,
        duration=outcome.duration,
        result=result,
    )
    # What the runner decided (runner/task/harness_choice.py) outranks what the result channel, reachable by user
    # code under an unprotected harness, claims; the claim is kept beside it.
    harness = {"version": result["harness-version"]} if "harness-version" in result else {}
    if harness_info:
        harness = {**harness_info, **({"reported": harness["version"]} if harness else {})}
    samples = parse_sample_lines(decode_output(bytes(outcome.data.data)))
    # a profile stage's ProfileResult comes from runner/stages/profile_stage.py, which built this stage
    return EvalResult(start=start, end=end or now(), compilation=compilation, run=run, harness=harness, samples=samples,
                      timing=stage_timing(outcome))
