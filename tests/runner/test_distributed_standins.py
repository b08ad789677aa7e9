"""Multi-GPU problems shaped like reference-kernels' amd_distributed (ag-gemm, all2all, gemm-rs) through the runner,
in its sandbox, on this CPU host: their harness sizes a pool of rank processes by POPCORN_GPUS and hands each case
one task per rank, so the runner must give a CPU host as many as the widest case (the ranks talk over gloo), and a
GPU host all its GPUs, refusing a case wider than the host. A harness forked from the warm runner spawns its rank
processes as a cold one does (they re-import eval.py from the run directory). The stand-ins are
tests/fixtures/distributed/."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runner.confinement.sandbox import SandboxPolicy
from runner.stages.execute import execute
from runner.stages.prepare import popcorn_gpus
from runner.task.payload import build_payload
from runner.task.taskfile import load_problem
from schemas.contracts import SystemInfo

pytestmark = pytest.mark.slow

PROBLEMS = Path(__file__).resolve().parents[1] / "fixtures" / "distributed" / "problems" / "amd_distributed"
NO_GATHER = '''
import torch


def custom_kernel(data):
    rows, weight, bias = data
    return rows @ weight.T + bias  # this rank's rows only: the all-gather is missing
'''

def run(problem: str, mode: str, code: str | None = None, seed: int | None = None, warm=None):
    loaded = load_problem(PROBLEMS / problem)
    source = code if code is not None else (PROBLEMS / problem / "submission.py").read_text()
    payload = build_payload(loaded.task, source, run_id=f"{problem}-{mode}", gpu="cpu", mode=mode,
                            secret=seed is not None, seed=seed)
    return execute(payload, sandbox=SandboxPolicy(), warm=warm)


@pytest.fixture(scope="module")
def results(warm_launcher):
    warm = run("gemm-rs", "test", warm=warm_launcher)  # as the local backend runs it: forked from a warm runner
    plan = {
        "ag-gemm test": ("ag-gemm", "test", None, None),
        "gemm-rs test": ("gemm-rs", "test", None, None),
        "all2all test": ("all2all", "test", None, None),
        "all2all leaderboard": ("all2all", "leaderboard", None, 1234567),
        "ag-gemm no gather": ("ag-gemm", "test", NO_GATHER, None),
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        return {"gemm-rs warm": warm, **dict(zip(plan, pool.map(lambda args: run(*args), plan.values()),
                                                  strict=True))}


@pytest.mark.parametrize("name", ["ag-gemm test", "gemm-rs test", "all2all test", "gemm-rs warm"])
def test_every_rank_of_every_case_runs_and_passes(results, name):
    result = results[name]
    stage = result.runs["test"].run
    assert result.success and stage.passed, (result.error, stage.result, stage.stderr[-3000:])
    assert stage.result["test-count"] == "2"
    assert "world_size: 4" in stage.result["test.0.spec"] and stage.result["test.0.status"] == "pass"


def test_a_ranked_run_passes_the_tests_then_times_with_rechecks(results):
    result = results["all2all leaderboard"]
    assert set(result.runs) == {"test", "benchmark", "leaderboard"}
    assert all(run.run.passed for run in result.runs.values()), {
        key: (run.run.result, run.run.stderr[-2000:]) for key, run in result.runs.items()}
    timed = result.runs["leaderboard"].run.result  # rank 0's clock, between barriers around every call
    assert int(timed["benchmark.0.runs"]) >= 3 and float(timed["benchmark.0.mean"]) > 0


def test_a_rank_that_skips_the_collective_fails_its_case_naming_the_rank(results):
    stage = results["ag-gemm no gather"].runs["test"].run
    assert stage.success and not stage.passed
    # one line per failed rank; the result line keeps the first, as upstream's harness writes them
    assert stage.result["test.0.error"] == "rank 0 - expected a tensor of shape (16, 8)", stage.result
    assert stage.result["test.1.status"] == "fail"


def test_popcorn_gpus_covers_the_widest_case_on_a_cpu_and_every_gpu_on_a_gpu_host():
    payload = build_payload(load_problem(PROBLEMS / "ag-gemm").task, "", run_id="r", gpu="cpu", mode="test",
                            secret=False, seed=None)
    assert popcorn_gpus(payload, SystemInfo(device_count=0)) == 4  # gloo ranks: as many as a case needs
    assert popcorn_gpus(payload, SystemInfo(device_count=8)) == 8  # an MI300x8: every GPU, one rank each
    with pytest.raises(ValueError, match="need 4 GPUs .* this host has 2"):
        popcorn_gpus(payload, SystemInfo(device_count=2))
