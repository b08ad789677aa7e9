"""Before the first stage of a run: the files written into the run directory, then the warm-up (py) or the compile
(cu, from this host's compile cache when the submission was compiled for another of its runs), and the harness
environment (POPCORN_SEED, POPCORN_GPUS)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path, PurePosixPath

from runner.launching.starter import Starter
from runner.stages.compile_cache import CompileCache, cache_key
from runner.stages.cuda import BINARY_NAME, compile_cuda, nvcc_version
from runner.stages.cuda_supervisor import SUPERVISOR_NAME, compile_supervisor
from runner.task.protocol import decode_output, truncate_output
from schemas.contracts import CompileResult, RunPayload, SystemInfo

WARM_UP_TIMEOUT_SECONDS = 120
WARM_UP_FILE = "submission.py"
TORCH_EXTENSION_MARKER = "-DTORCH_EXTENSION_NAME"


def prepare(payload: RunPayload, starter: Starter, env: dict[str, str],
            supervisor: str | None = None) -> tuple[list[str] | None, CompileResult | None]:
    """Write the files and warm up (py) or compile (cu). Returns the harness program (None when compilation
    failed) and the compile record. `supervisor`: the harness file of a supervised CUDA harness, also built alone
    as the program the runner starts (runner/stages/cuda_supervisor.py)."""
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
    # see runner/stages/compile_cache.py: only with the run's uid
    cache = CompileCache() if box.uid is not None else None
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


def stage_environment(env: dict[str, str], payload: RunPayload, system: SystemInfo) -> dict[str, str]:
    """The harness environment: POPCORN_SEED only when the payload has a seed, POPCORN_GPUS only for multi-GPU."""
    stage_env = dict(env)
    if payload.seed is not None:
        stage_env["POPCORN_SEED"] = str(payload.seed)
    if payload.multi_gpu:
        stage_env["POPCORN_GPUS"] = str(popcorn_gpus(payload, system))
    return stage_env


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
