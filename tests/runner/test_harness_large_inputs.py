"""A correct submission on a case whose inputs take tens of milliseconds to reach the worker and come back passes the
example harness's cross-check (problems/examples/harness_measure.py), through runner.stages.execute in the sandbox.

Before the cap on the calibration counted the bytes a request moves, every timed call of such a case was rejected:
the round trip (50-90 ms here for a 2048x2048 float32 vector addition) was cut to the fixed 2 ms cap, and the
submission failed with "unsynchronized work or timer tampering detected".
"""

from __future__ import annotations

import pytest

from problems import PROBLEMS_ROOT
from runner.confinement.sandbox import SandboxPolicy
from runner.stages.execute import execute
from runner.task.payload import build_payload
from runner.task.taskfile import load_problem

pytestmark = pytest.mark.slow

ADD = "def custom_kernel(data):\n    a, b = data\n    return a + b\n"
LARGE = 2048  # two 16 MiB inputs in, one 16 MiB output back


def test_a_correct_kernel_on_inputs_of_tens_of_mib_is_timed_not_refused():
    task = load_problem(PROBLEMS_ROOT / "examples" / "vectoradd_py").task
    task = task.model_copy(update={"benchmarks": [{"size": LARGE, "seed": 6252}]})
    payload = build_payload(task, ADD, run_id="large-inputs", gpu="cpu", mode="benchmark", secret=False, seed=None)
    result = execute(payload, sandbox=SandboxPolicy())
    stage = result.runs["benchmark"].run
    assert stage.passed, stage.result
    assert stage.result["benchmark.0.status"] == "pass"
    assert float(stage.result["benchmark.0.mean"]) > 0
