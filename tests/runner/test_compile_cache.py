"""A CUDA submission is compiled once per host for all its runs (runner/stages/compile_cache.py): its secret run
executes the binary its public run compiled; other code, or other flags, compile anew. nvcc compiles here without a GPU
(the stages themselves then end at the harness's first CUDA call)."""

from __future__ import annotations

import pytest

from problems import PROBLEMS_ROOT
from runner.confinement.sandbox import SandboxPolicy, isolation_available
from runner.stages import prepare as prepare_module
from runner.stages.compile_cache import CompileCache
from runner.stages.cuda import find_nvcc
from runner.stages.execute import execute
from runner.task.payload import build_payload
from runner.task.taskfile import load_problem

PROBLEM = PROBLEMS_ROOT / "cuda_examples" / "vectoradd_cu"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed"),
              pytest.mark.skipif(not isolation_available(), reason="the cache is used only with the per-run uid")]


def test_the_secret_run_executes_the_binary_the_public_run_compiled(monkeypatch, tmp_path):
    monkeypatch.setattr(prepare_module, "CompileCache", lambda: CompileCache(tmp_path / "cache"))
    compiles = []
    real = prepare_module.compile_cuda
    monkeypatch.setattr(prepare_module, "compile_cuda", lambda *a, **k: compiles.append(1) or real(*a, **k))
    task = load_problem(PROBLEM).task
    code = (PROBLEM / "submission.cu").read_text()

    def run(source: str, mode: str, seed: int | None):
        payload = build_payload(task, source, run_id=f"cache-{mode}", gpu="cpu", mode=mode, secret=seed is not None,
                                seed=seed, arch="80")
        result = execute(payload, sandbox=SandboxPolicy())
        assert result.success, result.error
        return next(iter(result.runs.values()))

    public = run(code, "leaderboard", None)
    assert public.compilation.success and len(compiles) == 1, public.compilation.stderr
    secret = run(code, "private", 905057207)
    assert secret.compilation == public.compilation and len(compiles) == 1  # the same binary, not compiled again
    # and it was run: the bundled CUDA harness is supervised, so the supervisor starts the cached worker binary
    assert secret.run is not None and "supervisor.out" in secret.run.command
    (entry,) = (tmp_path / "cache").iterdir()
    assert {"eval.out", "supervisor.out"} <= {path.name for path in entry.iterdir()}  # both binaries, or neither
    other = run(code + "\n// another submission\n", "leaderboard", None)
    assert other.compilation.success and len(compiles) == 2
