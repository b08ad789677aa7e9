"""The runner procedure (docs/authoring.md): write the files into a fresh directory, warm up (py) or compile (cu),
run the stages of the payload's mode and return a FullResult (docs/http-api.md "The streaming submit").

`success: false` on the FullResult is reserved for runner failures (an exception here); user failures (compile
errors, crashes, timeouts, failed checks) are recorded in the stage results of a successful FullResult.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from schemas.contracts import CaseValue, CompileResult, EvalResult, FullResult, RunPayload, RunResult, SystemInfo

from .chain import speaks_chain
from .compile_cache import CompileCache, cache_key
from .cuda import BINARY_NAME, compile_cuda, nvcc_version
from .cuda_supervisor import SUPERVISOR_NAME, compile_supervisor
from .environment import scrubbed_environment
from .harness_choice import choose_harness
from .launch import Starter, seed_pipe_variable
from .process import ProcessOutcome
from .profile_stage import run_profile_stage
from .protocol import decode_output, judge_stage, parse_sample_lines, truncate_output
from .sandbox import RunSandbox, SandboxPolicy
from .sysinfo import collect_system_info
from .taskfile import render_case_file
from .telemetry import measured
from .timing import iso, process_started_iso, stage_timing
from .warm_client import WarmLauncher

WARM_UP_TIMEOUT_SECONDS = 120
WARM_UP_FILE = "submission.py"
TORCH_EXTENSION_MARKER = "-DTORCH_EXTENSION_NAME"
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


def execute(payload: RunPayload, *, workdir: Path | None = None, sandbox: SandboxPolicy | None = None,
            warm: WarmLauncher | None = None, chain: bool = True) -> FullResult:
    """Run `payload` and return its FullResult. `workdir` is the parent of the fresh run directory (default: the
    system temp dir); the run directory is removed afterwards. With a `sandbox` policy every process it starts is
    confined (runner/sandbox.py); without one they run unconfined, still in a fresh directory. With `warm`, the
    Python processes are forked from that warm runner (runner/warm.py) instead of started cold. With `chain`, a
    run of several stages whose harness declares the chain extension runs them in one process (runner/chain.py);
    otherwise, and for every other harness, each stage is a process of its own."""
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


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _run_all(payload: RunPayload, starter: Starter, system: SystemInfo,
             harness: dict[str, str] | None = None, chain: bool = False) -> dict[str, EvalResult]:
    box = starter.box
    plans = plan_stages(payload)
    env = box.environment(scrubbed_environment())
    start = _now()
    stage_env = _stage_environment(env, payload, system)  # first: it refuses cases wider than the host
    program, compilation = _prepare(payload, starter, env, (harness or {}).get("supervisor"))
    if program is None:  # compilation failed: the chain stops before its first stage
        return {plans[0].key: EvalResult(start=start, end=_now(), compilation=compilation, run=None,
                                         harness=harness or {})}
    # Profile mode keeps a process per stage: its stages are one per benchmark (up to 18), and the chain forks a
    # worker per stage up front.
    if chain and len(plans) > 1 and payload.mode != "profile":
        from .chained import run_chained  # it builds on this module's stage helpers

        return run_chained(program, plans, payload, starter, stage_env, compilation, start, harness)
    runs: dict[str, EvalResult] = {}
    for index, plan in enumerate(plans):
        # The first stage's start covers writing the files and the warm-up/compile step, as upstream.
        stage_start = start if index == 0 else _now()
        runs[plan.key] = measured(plan.key, lambda plan=plan, stage_start=stage_start: _run_stage(
            program, plan, payload, starter, stage_env, compilation, stage_start, harness, system))
        stage = runs[plan.key].run
        if not (stage and stage.success and stage.passed) and payload.mode != "profile":
            break
    return runs


def _prepare(payload: RunPayload, starter: Starter, env: dict[str, str],
             supervisor: str | None = None) -> tuple[list[str] | None, CompileResult | None]:
    """Write the files and warm up (py) or compile (cu). Returns the harness program (None when compilation
    failed) and the compile record. `supervisor`: the harness file of a supervised CUDA harness, also built alone
    as the program the runner starts (runner/cuda_supervisor.py)."""
    box = starter.box
    run_dir = box.run_dir
    if payload.lang == "py":
        if not payload.main or payload.main not in payload.sources:
            raise ValueError(f"py payload main {payload.main!r} is not one of its sources")
        _write_files(run_dir, payload.sources)
        box.seal()
        compilation = _warm_up(starter, env) if WARM_UP_FILE in payload.sources else None
        return [sys.executable, payload.main], compilation
    files = {**payload.headers, **payload.sources}
    binaries = [BINARY_NAME, SUPERVISOR_NAME] if supervisor else [BINARY_NAME]
    program = [f"./{SUPERVISOR_NAME if supervisor else BINARY_NAME}"]
    cache = CompileCache() if box.uid is not None else None  # see runner/compile_cache.py: only with the run's uid
    key = cache_key(payload, nvcc_version(), supervisor) if cache is not None else ""
    compilation = cache.get(key, run_dir, binaries) if cache is not None else None
    if compilation is not None:  # this submission was compiled for one of its other runs on this host
        box.seal()
        return program, compilation
    _write_files(run_dir, files)
    box.open_for_build()
    try:
        compilation = compile_cuda(payload, run_dir, env, wrap=lambda argv, timeout: box.wrap(argv, timeout))
        if supervisor and compilation.success:
            built = compile_supervisor(payload, supervisor, run_dir, env, wrap=lambda argv, t: box.wrap(argv, t))
            compilation = compilation if built.success else built  # a failed harness build is what to show
        if compilation.success and cache is not None:
            cache.put(key, run_dir, binaries, compilation)  # before any user code has run
    finally:
        _remove_files(run_dir, files)  # user code must never read the reference sources
        box.seal()
    return (program if compilation.success else None), compilation


def widest_case(payload: RunPayload) -> int:
    """The most ranks any case of the payload asks for (`world_size`; 1 without one)."""
    return max((int(size) for case in [*payload.tests, *payload.benchmarks]
                if isinstance(size := case.get("world_size", 1), int)), default=1)


def popcorn_gpus(payload: RunPayload, system: SystemInfo) -> int:
    """POPCORN_GPUS, the ranks a multi-GPU harness may start at once (upstream's eval.py sizes its process pool
    by it): every GPU of a GPU host, which must cover the widest case (NCCL or RCCL put one rank per GPU); on a
    CPU host, where the ranks talk over gloo, as many as the widest case needs."""
    needed = widest_case(payload)
    if system.device_count == 0:
        return needed
    if needed > system.device_count:
        raise ValueError(f"the problem's cases need {needed} GPUs (world_size) and this host has "
                         f"{system.device_count}; run it on a GPU with as many (MI300x8, L4x4, ...)")
    return system.device_count


def _stage_environment(env: dict[str, str], payload: RunPayload, system: SystemInfo) -> dict[str, str]:
    """The harness environment: POPCORN_SEED only when the payload has a seed, POPCORN_GPUS only for multi-GPU."""
    stage_env = dict(env)
    if payload.seed is not None:
        stage_env["POPCORN_SEED"] = str(payload.seed)
    if payload.multi_gpu:
        stage_env["POPCORN_GPUS"] = str(popcorn_gpus(payload, system))
    return stage_env


def write_case_file(box, plan: StagePlan) -> Path:
    case_file = box.base / f"{plan.key}.cases.txt"  # outside the run directory, beside it
    case_file.write_text(render_case_file(plan.cases), encoding="utf-8")
    os.chmod(case_file, 0o644)
    return case_file


def stage_ranks(plan: StagePlan) -> int:
    return max((int(case.get("world_size", 1)) for case in plan.cases if isinstance(case.get("world_size", 1), int)),
               default=1)


def _run_stage(program: list[str], plan: StagePlan, payload: RunPayload, starter: Starter,
               env: dict[str, str], compilation: CompileResult | None, start: str,
               harness_info: dict[str, str] | None = None, system: SystemInfo | None = None) -> EvalResult:
    argv = [*program, plan.harness_stage, str(write_case_file(starter.box, plan))]
    if plan.harness_stage == "profile":
        return run_profile_stage(argv, plan, payload, starter, env, system or SystemInfo(), lambda argv, outcome: stage_result(
            argv, plan, payload, outcome, compilation, start, harness_info))
    outcome = starter.run(argv, timeout=plan.timeout, ranks=stage_ranks(plan), env=env)
    return stage_result(argv, plan, payload, outcome, compilation, start, harness_info)


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
    # What the runner decided (runner/harness_choice.py) outranks what the result channel, reachable by user code
    # under an unprotected harness, claims; the claim is kept beside it.
    harness = {"version": result["harness-version"]} if "harness-version" in result else {}
    if harness_info:
        harness = {**harness_info, **({"reported": harness["version"]} if harness else {})}
    samples = parse_sample_lines(decode_output(bytes(outcome.data.data)))
    # a profile stage's ProfileResult comes from runner/profile_stage.py, which built this stage
    return EvalResult(start=start, end=end or _now(), compilation=compilation, run=run, harness=harness, samples=samples,
                      timing=stage_timing(outcome))


def _warm_up(starter: Starter, env: dict[str, str]) -> CompileResult | None:
    """Run the submission once (no POPCORN_* variables) to fill the inline-extension build cache; recorded only if
    it printed the torch extension build line."""
    argv = [sys.executable, WARM_UP_FILE]
    outcome = starter.run(argv, timeout=WARM_UP_TIMEOUT_SECONDS, env=env, with_result_pipes=False)
    stdout = decode_output(bytes(outcome.stdout.data))
    if TORCH_EXTENSION_MARKER not in stdout:
        return None
    return CompileResult(
        success=True,
        command=shlex.join(argv),
        stdout=truncate_output(stdout, extra_lines=outcome.stdout.dropped_lines),
        stderr=truncate_output(decode_output(bytes(outcome.stderr.data)), extra_lines=outcome.stderr.dropped_lines),
        exit_code=outcome.exit_code,
    )


def _resolve_inside(run_dir: Path, name: str) -> Path:
    relative = PurePosixPath(name)
    if not name or relative.is_absolute() or ".." in relative.parts:
        raise ValueError(f"file name {name!r} does not stay inside the run directory")
    return run_dir.joinpath(*relative.parts)


def _write_files(run_dir: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        path = _resolve_inside(run_dir, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")


def _remove_files(run_dir: Path, files: dict[str, str]) -> None:
    for name in files:
        _resolve_inside(run_dir, name).unlink(missing_ok=True)
