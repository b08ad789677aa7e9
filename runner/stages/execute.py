"""The runner procedure (docs/authoring.md): write the files into a fresh directory, warm up (py) or compile (cu),
run the stages of the payload's mode and return a FullResult (docs/http-api.md "The streaming submit").

A run reads straight through: `execute` builds the run's sandbox and starter, prepare.py writes the files and
warms up or compiles, then the stages run one process each here (stage.py turns each outcome into its
EvalResult) or all in one harness process (chained.py, the same stage.py per stage).

`success: false` on the FullResult is reserved for runner failures (an exception here); user failures (compile
errors, crashes, timeouts, failed checks) are recorded in the stage results of a successful FullResult.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

from runner.confinement.environment import scrubbed_environment
from runner.confinement.sandbox import RunSandbox, SandboxPolicy
from runner.host.sysinfo import collect_system_info
from runner.launching.chain import speaks_chain
from runner.launching.starter import Starter, seed_pipe_variable
from runner.launching.warm_client import WarmLauncher
from runner.stages.chained import run_chained
from runner.stages.prepare import prepare, stage_environment
from runner.stages.profile_stage import run_profile_stage
from runner.stages.stage import StagePlan, now, plan_stages, stage_ranks, stage_result, write_case_file
from runner.stages.telemetry import measured
from runner.stages.timing import iso, process_started_iso
from runner.task.harness_choice import choose_harness
from schemas.contracts import CompileResult, EvalResult, FullResult, RunPayload, SystemInfo


def execute(payload: RunPayload, *, workdir: Path | None = None, sandbox: SandboxPolicy | None = None,
            warm: WarmLauncher | None = None, chain: bool = True) -> FullResult:
    """Run `payload` and return its FullResult. `workdir` is the parent of the fresh run directory (default: the
    system temp dir); the run directory is removed afterwards. With a `sandbox` policy every process it starts is
    confined (runner/confinement/sandbox.py); without one they run unconfined, still in a fresh directory. With
    `warm`, the Python processes are forked from that warm runner (runner/warm.py) instead of started cold. With
    `chain`, a run of several stages whose harness declares the chain extension runs them in one process
    (runner/launching/chain.py); otherwise, and for every other harness, each stage is a process of its own."""
    system = SystemInfo()
    try:
        system = collect_system_info()
        if sandbox is not None and system.runtime != "CPU":
            sandbox = sandbox.for_gpu_host()
        harness = choose_harness(payload)  # ours in place of a stock reference-kernels eval.py, when asked for
        with RunSandbox(sandbox, workdir) as box:
            payload = harness.payload
            main = payload.sources.get(payload.main) if payload.lang == "py" and payload.main else None
            runs = _run_all(payload, Starter(box, warm, seed_pipe_variable(main)), system, harness.info,
                            chain and speaks_chain(main))
        # Known to this process alone (the sandbox it built), never read from anything user code could write.
        return FullResult(success=True, system=system, runs=runs, timing=_run_timing(), isolation=box.level)
    except Exception as exc:  # noqa: BLE001 - a runner failure, never the user's: report it, never die silently
        return FullResult(success=False, error=f"runner error: {type(exc).__name__}: {exc}", system=system)


def _run_timing() -> dict[str, str]:
    started = process_started_iso()
    return {**({"runner_started": started} if started else {}), "result_ready": iso(time.time())}


def _run_all(payload: RunPayload, starter: Starter, system: SystemInfo,
             harness: dict[str, str] | None = None, chain: bool = False) -> dict[str, EvalResult]:
    box = starter.box
    plans = plan_stages(payload)
    env = box.environment(scrubbed_environment())
    start = now()
    stage_env = stage_environment(env, payload, system)  # first: it refuses cases wider than the host
    program, compilation = prepare(payload, starter, env, (harness or {}).get("supervisor"))
    if program is None:  # compilation failed: the chain stops before its first stage
        return {plans[0].key: EvalResult(start=start, end=now(), compilation=compilation, run=None,
                                         harness=harness or {})}
    # Profile mode keeps a process per stage: its stages are one per benchmark (up to 18), and the chain forks a
    # worker per stage up front.
    if chain and len(plans) > 1 and payload.mode != "profile":
        return run_chained(program, plans, payload, starter, stage_env, compilation, start, harness)
    runs: dict[str, EvalResult] = {}
    for index, plan in enumerate(plans):
        # The first stage's start covers writing the files and the warm-up/compile step, as upstream.
        stage_start = start if index == 0 else now()
        runs[plan.key] = measured(plan.key, functools.partial(
            _run_stage, program, plan, payload, starter, stage_env, compilation, stage_start, harness, system))
        stage = runs[plan.key].run
        if not (stage and stage.success and stage.passed) and payload.mode != "profile":
            break
    return runs


def _run_stage(program: list[str], plan: StagePlan, payload: RunPayload, starter: Starter,
               env: dict[str, str], compilation: CompileResult | None, start: str,
               harness_info: dict[str, str] | None = None, system: SystemInfo | None = None) -> EvalResult:
    argv = [*program, plan.harness_stage, str(write_case_file(starter.box, plan))]
    if plan.harness_stage == "profile":
        return run_profile_stage(argv, plan, payload, starter, env, system or SystemInfo(),
                                 lambda argv, outcome: stage_result(argv, plan, payload, outcome, compilation, start,
                                                                    harness_info))
    outcome = starter.run(argv, timeout=plan.timeout, ranks=stage_ranks(plan), env=env)
    return stage_result(argv, plan, payload, outcome, compilation, start, harness_info)
