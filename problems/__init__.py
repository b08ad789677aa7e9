"""The bundled example problem sets, in the reference-kernels layout (docs/authoring.md, "The harness protocol").

`problems/*.yaml` are competition files (the file stem is the problem-set name); each problem directory holds a
`task.yml` plus the files it names. These files ship as package data so that `kernelbot up` can load the examples
from an installed wheel. `examples.yaml` lists the CPU-runnable Python problems (`examples/`, shared harness
`examples/eval.py`) that `kernelbot up` loads; `cuda_examples.yaml` lists the CUDA problem (`cuda_examples/`, shared
harness `cuda_examples/eval.cu`), which needs an NVIDIA GPU and is therefore not loaded onto the cpu backend.
"""

from __future__ import annotations

from pathlib import Path

PROBLEMS_ROOT = Path(__file__).parent


def competition_files() -> list[Path]:
    """The competition YAML files (not recursive), sorted."""
    return sorted(PROBLEMS_ROOT.glob("*.yaml"))


def bundled_problem_dirs() -> list[Path]:
    """Every bundled problem directory (one holding a task.yml), sorted."""
    return sorted(task_file.parent for task_file in PROBLEMS_ROOT.rglob("task.yml"))
