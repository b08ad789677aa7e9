"""`kernelbot problems check PATH` on a fixture tree shaped like today's reference-kernels problem sets, one problem per
family: a CuTe-DSL NVIDIA problem, a Helion problem, an aiter AMD problem, a distributed AMD problem and a linalg
problem (tests/fixtures/problem_families). The command runs as its own process, as an organiser runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from services.cli.problems_check import imported_modules

FIXTURE = Path(__file__).parents[1] / "fixtures" / "problem_families"
CATALOGUE = FIXTURE / "catalogue.yaml"
REPO = Path(__file__).resolve().parents[2]


def check(checkout: Path, *args: str, catalogue: Path | None = CATALOGUE) -> tuple[int, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env["PYTHONPATH"] = str(REPO)
    options = ["--catalogue", str(catalogue)] if catalogue else []
    done = subprocess.run([sys.executable, "-m", "services.cli", "problems", "check", str(checkout), *options, *args],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, done.stdout.splitlines()


@pytest.fixture
def checkout(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "reference-kernels"))


def set_gpus(checkout: Path, competition: str, gpus: list[str]) -> None:
    path = checkout / "problems" / competition
    data = yaml.safe_load(path.read_text())
    data["problems"][0]["gpus"] = gpus
    path.write_text(yaml.safe_dump(data))


def test_every_family_passes_one_line_per_problem():
    code, lines = check(FIXTURE)
    assert code == 0, lines
    assert lines == [
        "ok    amd_202602.yaml/amd-fp8-rowwise: MI355X (amd)",
        "ok    amd_distributed.yaml/amd-reduce-scatter: MI300x8 (amd)",
        "ok    helion.yaml/row_norm: B200_Nebius (nvidia)",
        "ok    linalg.yaml/lu: B200 (nvidia)",
        "ok    nvidia.yaml/fp4_scale: B200 (nvidia)",
        "5 ok, 0 failed",
    ]


def test_a_problem_naming_a_gpu_whose_image_lacks_its_imports_fails(checkout):
    set_gpus(checkout, "amd_202602.yaml", ["MI355X", "B200"])  # aiter on an NVIDIA image
    set_gpus(checkout, "nvidia.yaml", ["MI300"])  # CuTe DSL on a ROCm image
    code, lines = check(checkout)
    assert code == 1
    assert "FAIL  amd_202602.yaml/amd-fp8-rowwise: B200: the nvidia image does not provide aiter" in lines
    assert "FAIL  nvidia.yaml/fp4_scale: MI300: the amd image does not provide cuda, cutlass" in lines
    assert lines[-1] == "3 ok, 2 failed"


def test_a_gpu_outside_the_catalogue_fails(checkout):
    set_gpus(checkout, "linalg.yaml", ["H200"])
    code, lines = check(checkout)
    assert code == 1 and "FAIL  linalg.yaml/lu: H200: not in the GPU catalogue" in lines
    # Without --catalogue the dispatcher's own resolution applies: KB_GPU_CATALOGUE (here unset), then upstream's
    # names by default, whose entries say which image would serve them even without their backend's credentials.
    code, lines = check(FIXTURE, catalogue=None)
    assert code == 0, lines
    assert "ok    helion.yaml/row_norm: B200_Nebius (nvidia, inactive)" in lines
    assert "ok    amd_distributed.yaml/amd-reduce-scatter: MI300x8 (amd, inactive)" in lines
    code, lines = check(checkout, catalogue=None)
    assert code == 1 and "FAIL  linalg.yaml/lu: H200: not in the GPU catalogue" in lines


def test_a_cuda_problem_on_an_amd_gpu_fails_for_its_language(checkout):
    directory = checkout / "problems" / "linalg" / "lu_cu"
    directory.mkdir()
    (directory / "kernel.cu").write_text("__global__ void k() {}\n")
    (directory / "task.yml").write_text(yaml.safe_dump({
        "files": [{"name": "submission.cu", "source": "@SUBMISSION@"}, {"name": "kernel.cu", "source": "kernel.cu"}],
        "lang": "cu", "description": "LU in CUDA.", "config": {"sources": ["kernel.cu", "submission.cu"]},
        "tests": [{"n": 8}]}))
    competition = checkout / "problems" / "linalg.yaml"
    data = yaml.safe_load(competition.read_text())
    data["problems"].append({"directory": "linalg/lu_cu", "name": "lu_cu", "gpus": ["MI300", "B200"]})
    competition.write_text(yaml.safe_dump(data))
    code, lines = check(checkout)
    assert code == 1 and "FAIL  linalg.yaml/lu_cu: MI300: the amd image runs py, not cu" in lines


def test_a_broken_task_file_is_one_failing_line(checkout):
    (checkout / "problems" / "linalg" / "lu" / "task.yml").write_text("lang: rust\n")
    code, lines = check(checkout)
    assert code == 1
    [line] = [line for line in lines if line.startswith("FAIL  linalg.yaml/lu:")]
    assert "linalg/lu/task.yml" in line


def test_imports_read_from_python_and_from_placeholder_templates():
    source = "import os\nimport torch.distributed as dist\nfrom . import x\ntry:\n    import fancy\nexcept ImportError:\n" \
             "    fancy = None\nfrom cutlass.cute import nvgpu\n"
    assert imported_modules(source) == {"os", "torch", "cutlass"}
    placeholder = "import torch\nimport helion.language as hl\n\ndef kernel(...) -> ...:\n    ...\n"
    assert imported_modules(placeholder) == {"torch", "helion"}
