"""The stages of one run in one harness process (runner/launching/chain.py), turned into the same EvalResults
that one process per stage gives: per stage its own command line (`<program> <stage> <casefile>`, what the stage is),
its stdout, stderr, exit code, duration, result and samples, its start and end, and the telemetry of a timed stage.
The chain goes on while a stage passes (every stage in profile mode), as the stage loop of
runner/stages/execute.py does."""

from __future__ import annotations

from runner.host import nvml
from runner.launching.chain import ChainStage, chain_argv
from runner.launching.process import ProcessOutcome
from runner.launching.starter import Starter
from runner.stages.stage import StagePlan, now, stage_ranks, stage_result, write_case_file
from runner.stages.telemetry import TIMED_STAGES, stage_telemetry
from schemas.contracts import CompileResult, EvalResult, RunPayload


def run_chained(program: list[str], plans: list[StagePlan], payload: RunPayload, starter: Starter,
                env: dict[str, str], compilation: CompileResult | None, start: str,
                harness: dict[str, str] | None) -> dict[str, EvalResult]:
    stages = [ChainStage(plan.harness_stage, str(write_case_file(starter.box, plan)), plan.timeout) for plan in plans]
    commands = [[*program, stage.harness_stage, stage.case_file] for stage in stages]
    starts, ends = [start], []  # the first stage's start covers writing the files and the warm-up, as upstream
    telemetry = [_telemetry(plans[0])]

    def proceed(index: int, outcome: ProcessOutcome) -> bool:
        ends.append(now())
        telemetry[index] = (telemetry[index], _telemetry(plans[index]))
        run = stage_result(commands[index], plans[index], payload, outcome, compilation, starts[index], harness).run
        if payload.mode != "profile" and not (run and run.success and run.passed):
            return False
        if index + 1 < len(plans):
            starts.append(now())
            telemetry.append(_telemetry(plans[index + 1]))
        return True

    outcomes = starter.run_chain(chain_argv(program, stages), stages, proceed=proceed,
                                 ranks=max(stage_ranks(plan) for plan in plans), env=env)
    if len(ends) < len(outcomes):  # the last stage ended with the process (a crash or its timeout)
        ends.append(now())
        telemetry[-1] = (telemetry[-1], _telemetry(plans[len(outcomes) - 1]))
    runs: dict[str, EvalResult] = {}
    for index, outcome in enumerate(outcomes):  # built now: a process that died mid-stage has its exit code now
        plan = plans[index]
        result = stage_result(commands[index], plan, payload, outcome, compilation, starts[index], harness,
                              end=ends[index])
        if plan.key in TIMED_STAGES:
            before, after = telemetry[index]
            result = result.model_copy(update={"telemetry": stage_telemetry(before, after)})
        runs[plan.key] = result
    return runs


def _telemetry(plan: StagePlan):
    return nvml.telemetry() if plan.key in TIMED_STAGES else None
