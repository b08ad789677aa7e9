"""The nvcc compile step of a `cu` run (docs/authoring.md point 3)."""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from runner.launching.process import run_process
from runner.task.protocol import decode_output, truncate_output
from schemas.contracts import CompileResult, RunPayload

COMPILE_TIMEOUT_SECONDS = 120
BINARY_NAME = "eval.out"
FIXED_NVCC_FLAGS = (
    "--std=c++20", "-DNDEBUG", "-Xcompiler=-Wno-psabi", "-Xcompiler=-fno-strict-aliasing", "--expt-extended-lambda",
    "--expt-relaxed-constexpr", "-forward-unknown-to-host-compiler", "-O3", "-Xnvlink=--verbose",
    "-Xptxas=--verbose", "-Xptxas=--warn-on-spills",
)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
ARCH = re.compile(r"[0-9]+[a-z]?\Z")


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.is_file() else None


def nvcc_command(nvcc: str, payload: RunPayload, run_dir: Path, output: str = BINARY_NAME) -> list[str]:
    """The full nvcc argv; the flag list is built fresh every time (upstream let -I/-D pile up across compiles).

    Task compile_flags are appended after the fixed flags (settled point 4). Raises ValueError on invalid config.
    """
    includes = []
    for directory in payload.include_dirs:
        if not (run_dir / directory).is_dir():
            raise ValueError(f"include directory {directory!r} does not exist")
        includes.append(f"-I{directory}")
    defines = []
    for name, value in payload.defines.items():
        if not IDENTIFIER.match(name):
            raise ValueError(f"define name {name!r} is not an identifier")
        defines.append(f"-D{name}={value}" if value else f"-D{name}")
    for flag in payload.compile_flags:
        if not flag.startswith("-"):
            raise ValueError(f"compile flag {flag!r} does not start with '-'")
    if payload.arch is None:
        arch = "-arch=native"
    elif ARCH.match(payload.arch):
        arch = f"-gencode=arch=compute_{payload.arch},code=sm_{payload.arch}"
    else:
        raise ValueError(f"invalid GPU architecture {payload.arch!r}")
    return [nvcc, *FIXED_NVCC_FLAGS, *payload.compile_flags, *includes, *defines, *payload.sources, arch,
            "-o", output]


def compile_cuda(payload: RunPayload, run_dir: Path, env: dict[str, str],
                 wrap: Callable[[list[str], float], list[str]] | None = None,
                 output: str = BINARY_NAME) -> CompileResult:
    """Compile the payload's sources in `run_dir` into `output` (`eval.out`). Never raises for user or config
    errors. `wrap` confines the compiler process (runner/confinement/sandbox.py); the recorded command is the
    unwrapped one."""
    nvcc = find_nvcc()
    if nvcc is None:
        return CompileResult(nvcc_found=False, success=False, stderr="nvcc not found on the runner", exit_code=-1)
    version = _nvcc_version(nvcc)
    try:
        argv = nvcc_command(nvcc, payload, run_dir, output)
    except ValueError as exc:
        return CompileResult(nvcc_version=version, success=False, stderr=f"invalid compile configuration: {exc}",
                             exit_code=113)
    launched = wrap(argv, COMPILE_TIMEOUT_SECONDS) if wrap is not None else argv
    outcome = run_process(launched, cwd=str(run_dir), env=env, timeout=COMPILE_TIMEOUT_SECONDS,
                          with_result_pipes=False)
    stderr = truncate_output(decode_output(bytes(outcome.stderr.data)), extra_lines=outcome.stderr.dropped_lines)
    if outcome.timed_out:
        stderr += f"\ncompilation timed out after {COMPILE_TIMEOUT_SECONDS} seconds"
    return CompileResult(
        nvcc_version=version,
        success=outcome.exit_code == 0 and (run_dir / output).is_file(),
        command=shlex.join(["nvcc", *argv[1:]]),
        stdout=truncate_output(decode_output(bytes(outcome.stdout.data)), extra_lines=outcome.stdout.dropped_lines),
        stderr=stderr,
        exit_code=outcome.exit_code,
    )


def nvcc_version() -> str:
    """The version banner of the nvcc this host would compile with ('' when there is none)."""
    nvcc = find_nvcc()
    return _nvcc_version(nvcc) if nvcc else ""


@functools.lru_cache(maxsize=4)
def _nvcc_version(nvcc: str) -> str:
    try:
        done = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30, check=False,
                              env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()
