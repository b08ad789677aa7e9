"""The second compile of a supervised CUDA harness (issue #16 item 5; problems/cuda_examples/eval.cu).

A harness that runs user code in its own process cannot keep the result pipe from it: C++ linked into the binary
runs before main and can write to any descriptor. Our CUDA harness is therefore built twice: `eval.out` from the
submission and the harness (the worker, as before), and `supervisor.out` from the harness file alone with
-DKERNELBOT_SUPERVISOR. The runner starts the supervisor, which owns the result pipe and the seed, starts
`./eval.out worker ...` with nothing but its request/reply pipes, and checks every output it gets back.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from runner.stages.cuda import compile_cuda
from schemas.contracts import CompileResult, RunPayload

SUPERVISOR_NAME = "supervisor.out"
SUPERVISOR_DEFINE = "KERNELBOT_SUPERVISOR"


def supervisor_payload(payload: RunPayload, harness_file: str) -> RunPayload:
    """The payload of the supervisor build: only the harness file is compiled; the problem's headers are written
    beside it as for the worker; no submission code at all."""
    return payload.model_copy(update={"sources": {harness_file: payload.sources[harness_file]},
                                      "defines": {**payload.defines, SUPERVISOR_DEFINE: ""}})


def compile_supervisor(payload: RunPayload, harness_file: str, run_dir: Path, env: dict[str, str],
                       wrap: Callable[[list[str], float], list[str]] | None = None) -> CompileResult:
    return compile_cuda(supervisor_payload(payload, harness_file), run_dir, env, wrap=wrap, output=SUPERVISOR_NAME)
