"""The example harness's profile mode and multi-rank (`world_size`) cases, through runner.stages.execute in the sandbox.

Multi-GPU problems run one worker per rank with torch.distributed; on this CPU host the ranks talk over gloo on the
loopback of the runner's network namespace. On a GPU host the same code takes NCCL (not exercised here).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from problems import PROBLEMS_ROOT
from runner.confinement.sandbox import SandboxPolicy
from runner.stages.execute import execute
from runner.task.payload import build_payload
from runner.task.profiling import decode_report
from runner.task.taskfile import load_problem

pytestmark = pytest.mark.slow

ALL_REDUCE_REFERENCE = '''
import torch


def generate_input(size: int, seed: int, world_size: int, rank: int):
    base = torch.randn(size, generator=torch.Generator().manual_seed(seed))
    return base * (rank + 1), rank, world_size


def check_implementation(data, output):
    tensor, rank, world_size = data
    expected = tensor / (rank + 1) * (world_size * (world_size + 1) / 2)
    if type(output) is not torch.Tensor or output.shape != expected.shape:
        return False, "wrong output type or shape"
    if not torch.allclose(output, expected, rtol=1e-5, atol=1e-5):
        return False, "not the sum over ranks"
    return True, ""
'''
ALL_REDUCE = '''
import torch.distributed as dist


def custom_kernel(data):
    tensor, _, _ = data
    out = tensor.clone()
    dist.all_reduce(out)
    return out
'''
LOCAL_ONLY = '''
def custom_kernel(data):
    return data[0].clone()
'''


@pytest.fixture(scope="module")
def all_reduce_task(tmp_path_factory):
    directory = tmp_path_factory.mktemp("problems") / "set" / "allreduce_py"
    directory.mkdir(parents=True)
    (directory / "reference.py").write_text(ALL_REDUCE_REFERENCE)
    (directory / "task.py").write_text("")
    examples = PROBLEMS_ROOT / "examples"
    task = {
        "files": [{"name": "submission.py", "source": "@SUBMISSION@"}, {"name": "task.py", "source": "task.py"},
                  {"name": "reference.py", "source": "reference.py"},
                  {"name": "eval.py", "source": str(Path("..") / "eval.py")},
                  {"name": "harness_worker.py", "source": str(Path("..") / "harness_worker.py")},
                  {"name": "harness_wire.py", "source": str(Path("..") / "harness_wire.py")},
                  {"name": "harness_supervisor.py", "source": str(Path("..") / "harness_supervisor.py")},
                  {"name": "harness_measure.py", "source": str(Path("..") / "harness_measure.py")},
                  {"name": "harness_batch.py", "source": str(Path("..") / "harness_batch.py")},
                  {"name": "harness_group.py", "source": str(Path("..") / "harness_group.py")}],
        "lang": "py", "description": "Sum a vector over the ranks.", "config": {"main": "eval.py"},
        "tests": [{"size": 33, "seed": 5, "world_size": 2}],
        "benchmarks": [{"size": 64, "seed": 9, "world_size": 2}],
        "multi_gpu": True, "test_timeout": 120, "benchmark_timeout": 120,
    }
    for name in ("eval.py", "harness_worker.py", "harness_wire.py", "harness_supervisor.py", "harness_measure.py",
                 "harness_batch.py", "harness_group.py"):
        (directory.parent / name).write_text((examples / name).read_text())
    (directory / "task.yml").write_text(yaml.safe_dump(task, sort_keys=False))
    return load_problem(directory).task


@pytest.fixture(scope="module")
def results(all_reduce_task):
    identity = load_problem(PROBLEMS_ROOT / "examples" / "identity_py").task
    identity_code = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
    plan = {
        "all-reduce": (all_reduce_task, ALL_REDUCE, "benchmark"),
        "local-only": (all_reduce_task, LOCAL_ONLY, "test"),
        "profile": (identity, identity_code, "profile"),
    }

    def run(item):
        key, (task, code, mode) = item
        payload = build_payload(task, code, run_id=key, gpu="cpu", mode=mode, secret=False, seed=None)
        return key, execute(payload, sandbox=SandboxPolicy())

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(pool.map(run, plan.items()))


def test_a_multi_rank_case_runs_one_worker_per_rank_and_is_timed(results):
    result = results["all-reduce"]
    stage = result.runs["benchmark"].run
    assert result.success and stage.passed, (stage.result, stage.stderr[-2000:])
    assert int(stage.result["benchmark.0.runs"]) >= 10 and float(stage.result["benchmark.0.mean"]) > 0


def test_a_rank_that_does_not_communicate_fails_its_case_naming_the_rank(results):
    stage = results["local-only"].runs["test"].run
    assert stage.success and not stage.passed, stage.stderr[-2000:]
    assert stage.result["test.0.error"] == "rank 0 - not the sum over ranks", stage.result


def test_profile_mode_profiles_one_call_per_benchmark_with_torch_profiler(results):
    result = results["profile"]
    assert list(result.runs) == ["profile.0", "profile.1"]
    for stage_key, stage in result.runs.items():
        run = stage.run
        assert run.success and run.passed, (run.result, run.stderr[-2000:])
        report = decode_report(run.result["benchmark.0.report"])
        assert "custom_kernel" in report and "Self CPU" in report, report
        assert stage.profile.profiler == "torch.profiler"
        with zipfile.ZipFile(io.BytesIO(base64.b64decode(stage.profile.trace))) as archive:
            folder = archive.namelist()[0].split("/")[0]
            assert folder.startswith(f"profile.{stage_key[-1]}-")
            assert archive.read(f"{folder}/torch-details.txt").decode().rstrip("\n") == report
            rows = list(csv.reader(io.StringIO(archive.read(f"{folder}/torch-details.csv").decode())))
            assert rows[0][:2] == ["Name", "Self CPU %"] and "custom_kernel" in [row[0] for row in rows[1:]]
            manifest = json.loads(archive.read(f"{folder}/manifest.json"))
            assert manifest["profiler"] == "torch.profiler" and manifest["fingerprint"].startswith("sha256:")
            assert manifest["benchmark"]["index"] == int(stage_key[-1])
