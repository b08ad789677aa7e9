"""Running submissions for the conformance checks: through runner.stages.execute (the production path, in the sandbox),
and the bundled CUDA harness built once in a directory for repeated timing runs."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from problems import PROBLEMS_ROOT
from runner.confinement.environment import scrubbed_environment
from runner.confinement.sandbox import SandboxPolicy
from runner.stages.cuda import BINARY_NAME, compile_cuda
from runner.stages.cuda_supervisor import SUPERVISOR_NAME, compile_supervisor
from runner.stages.execute import execute
from runner.task.payload import build_payload
from runner.task.protocol import parse_result_lines
from runner.task.taskfile import load_problem
from schemas.contracts import FullResult, Mode, Task

SOURCES = Path(__file__).parent / "sources"
CUDA_PROBLEM = PROBLEMS_ROOT / "cuda_examples" / "vectoradd_cu"
SECRET_SEED = 1_634_092_187
TRUTH_BINARY = "graph_truth.out"


@dataclass(frozen=True)
class Outcome:
    """What the platform would make of a run: passed (every stage that ran passed), the first error, the score."""

    passed: bool
    error: str
    mean_ns: float | None
    result: FullResult


def source(name: str) -> str:
    return (SOURCES / name).read_text(encoding="utf-8")


def cuda_task() -> Task:
    return load_problem(CUDA_PROBLEM).task


def run(task: Task, code: str, mode: Mode = "leaderboard", seed: int | None = None) -> Outcome:
    payload = build_payload(task, code, run_id="conformance", gpu="conformance", mode=mode, secret=seed is not None,
                            seed=seed)
    return outcome(execute(payload, sandbox=SandboxPolicy()))


def outcome(result: FullResult) -> Outcome:
    if not result.success:
        return Outcome(False, result.error, None, result)
    for key, stage in result.runs.items():
        if stage.compilation is not None and not stage.compilation.success:
            return Outcome(False, f"{key}: compilation failed: {stage.compilation.stderr[-300:]}", None, result)
        run_result = stage.run
        if run_result is None or not (run_result.success and run_result.passed):
            return Outcome(False, f"{key}: {first_error(run_result.result if run_result else {})}", None, result)
    last_run = list(result.runs.values())[-1].run if result.runs else None  # every stage ran and passed
    last = last_run.result if last_run else {}
    mean = float(last["benchmark.0.mean"]) if "benchmark.0.mean" in last else None
    return Outcome(True, "", mean, result)


def first_error(result: dict[str, str]) -> str:
    for key, value in result.items():
        if key.endswith(".error") or key == "error":
            return value
    return f"exit without a passing verdict ({result.get('check', 'no check line')})"


class CudaBuild:
    """The bundled CUDA problem with one submission, compiled once (worker, supervisor and the graph ground truth)
    in `directory`, so that a benchmark stage can be repeated without recompiling."""

    def __init__(self, directory: Path, code: str):
        self.directory = directory
        task = cuda_task()
        payload = build_payload(task, code, run_id="conformance-noise", gpu="conformance", mode="benchmark",
                                secret=False, seed=None)
        for name, content in {**payload.headers, **payload.sources, "graph_truth.cu": source("graph_truth.cu")}.items():
            (directory / name).write_text(content, encoding="utf-8")
        env = scrubbed_environment()
        harness = next(name for name in payload.sources if name != payload.submission_file)
        truth = payload.model_copy(update={"sources": {payload.submission_file: code, "graph_truth.cu": ""},
                                           "compile_flags": ["--default-stream=per-thread"]})
        self.compilations = [compile_cuda(payload, directory, env),
                             compile_supervisor(payload, harness, directory, env),
                             compile_cuda(truth, directory, env, output=TRUTH_BINARY)]

    @property
    def problem(self) -> str:
        failed = [c for c in self.compilations if not c.success]
        return f"compilation failed: {failed[0].stderr[-300:]}" if failed else ""

    def benchmark_mean(self, size: int, timeout: float = 300) -> float:
        (self.directory / "cases.txt").write_text(f"size: {size}; seed: 4242\n", encoding="utf-8")
        read_end, write_end = os.pipe()
        try:
            done = subprocess.run([f"./{SUPERVISOR_NAME}", "benchmark", "cases.txt"], cwd=self.directory,
                                  env={**scrubbed_environment(), "POPCORN_FD": str(write_end)}, pass_fds=(write_end,),
                                  capture_output=True, text=True, timeout=timeout, check=False)
        finally:
            os.close(write_end)
            with os.fdopen(read_end, encoding="utf-8") as pipe:
                channel = pipe.read()
        result, _ = parse_result_lines(channel)
        if done.returncode != 0 or result.get("check") != "pass":
            raise RuntimeError(f"benchmark failed (exit {done.returncode}): {first_error(result)} {done.stderr[-300:]}")
        return float(result["benchmark.0.mean"])

    def truth_ns(self, size: int) -> float:
        done = subprocess.run([f"./{TRUTH_BINARY}", str(size)], cwd=self.directory, capture_output=True, text=True,
                              timeout=300, check=False)
        if done.returncode != 0 or not done.stdout.startswith("truth_ns "):
            raise RuntimeError(f"graph ground truth failed (exit {done.returncode}): {done.stderr[-300:]}")
        return float(done.stdout.split()[1])


__all__ = ["BINARY_NAME", "CudaBuild", "Outcome", "SECRET_SEED", "cuda_task", "outcome", "run", "source"]
