"""Profile mode's stages (docs/quickstart.md, "Profiling"): each chosen benchmark case under the host's profiler.

On CUDA and ROCm hosts the harness runs under Nsight Compute or rocprofv3 (runner/profilers/), started cold and
confined like every process of the run; the tool's files are read back through the same confinement, because in
the full sandbox the run's TMPDIR is visible to its processes alone. On CPU hosts the harness's own torch.profiler
table is the capture. Either way the stage's ProfileResult holds one zip in the same shape (runner/profilers/
bundle.py), and a failed or empty capture fails the stage with the reason.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
from collections.abc import Mapping
from typing import Any

from runner.launching.process import DATA_LIMIT, ProcessOutcome, run_process
from runner.launching.starter import Starter
from runner.profilers import Capture, tool_for
from runner.profilers.base import HARNESS_ENV
from runner.profilers.bundle import TraceTooLarge, bundle, case_directory, config_sha256, fingerprint
from runner.profilers.torch_table import DETAILS_CSV, DETAILS_TXT, table_csv, table_rows
from runner.task.profiling import TORCH_PROFILER, decode_report, encode_report
from runner.task.protocol import decode_output
from schemas.contracts import EvalResult, ProfileOptions, ProfileResult, RunPayload, SystemInfo

REPORT_LINES = 400  # of the details text, shown in the stage's report (the zip holds all of it)


class ConfinedTool:
    """runner/profilers/base.RunTool for one run: commands confined like the harness; their output and the files
    read come back through the data pipe (16 MiB), not the 1 MiB stdout capture."""

    def __init__(self, starter: Starter, env: dict[str, str], timeout: float,
                 binaries: dict[str, str] | None = None) -> None:
        self.box, self.env, self.timeout = starter.box, env, timeout
        self.binaries = binaries or {}  # a tool's name -> where the host has it

    def located(self, argv: list[str]) -> list[str]:
        return [self.binaries.get(argv[0], argv[0]), *argv[1:]] if argv else argv

    def start(self, argv: list[str], *, ranks: int = 1, env: dict[str, str] | None = None) -> ProcessOutcome:
        return run_process(self.box.wrap(argv, self.timeout, ranks), cwd=str(self.box.run_dir),
                           env=env or self.env, timeout=self.timeout, reap=self.box.kill_strays)

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        outcome = self.start([sys.executable, "-I", "-S", "-c", RUN_TO_DATA, *self.located(argv)])
        if outcome.data.overflowed:  # an export cut short is no export
            return 1, "", f"its output passed {DATA_LIMIT >> 20} MiB"
        return (outcome.exit_code, decode_output(bytes(outcome.data.data)),
                decode_output(bytes(outcome.stderr.data)))

    def files(self, directory: str) -> list[str]:
        outcome = self.start([sys.executable, "-I", "-S", "-c", LIST_FILES, directory])
        return sorted(line for line in decode_output(bytes(outcome.stdout.data)).splitlines() if line)

    def read(self, path: str) -> bytes:
        """The whole file, a pipe's worth at a time: a report can be larger than one pipe carries."""
        parts: list[bytes] = []
        while True:
            part = bytes(self.start([sys.executable, "-I", "-S", "-c", COPY_TO_DATA, path,
                                     str(len(parts) * DATA_LIMIT), str(DATA_LIMIT)]).data.data)
            parts.append(part)
            if len(part) < DATA_LIMIT:
                return b"".join(parts)


# Small programs run confined by the run's interpreter (visible in every sandbox); the data pipe's number is in
# POPCORN_DATA_FD (a shell's `>&N` takes one digit only).
RUN_TO_DATA = ("import os, subprocess, sys\n"
               "sys.exit(subprocess.call(sys.argv[1:], stdout=int(os.environ['POPCORN_DATA_FD'])))")
LIST_FILES = ("import os, sys\n"
              "for top, _, names in os.walk(sys.argv[1]):\n"
              "    for name in names:\n"
              "        print(os.path.relpath(os.path.join(top, name), sys.argv[1]))")
COPY_TO_DATA = ("import os, sys\n"
                "with open(sys.argv[1], 'rb') as source, os.fdopen(int(os.environ['POPCORN_DATA_FD']), 'wb') as out:\n"
                "    source.seek(int(sys.argv[2]))\n"
                "    left = int(sys.argv[3])\n"
                "    while left and (block := source.read(min(left, 1 << 20))):\n"
                "        out.write(block)\n"
                "        left -= len(block)")


def profile_case(plan_key: str, payload: RunPayload) -> tuple[int, dict[str, Any]]:
    index = int(plan_key.removeprefix("profile."))
    return index, payload.benchmarks[index]


def run_profile_stage(argv: list[str], plan, payload: RunPayload, starter: Starter, env: dict[str, str],
                      system: SystemInfo, finish) -> EvalResult:
    """The stage: `argv` is the harness's own command line; `finish(argv, outcome)` makes its EvalResult."""
    options = payload.profile or ProfileOptions()
    tool = tool_for(system.runtime)
    if tool is None:
        outcome = starter.run(argv, timeout=plan.timeout, env=env)
        return with_torch_profile(finish(argv, outcome), plan.key, payload, system, options)
    binary = tool.capture_argv(options, "")[0]
    installed = shutil.which(binary, path=env.get("PATH"))
    if installed is None:
        evaluation = finish(argv, starter.run(argv, timeout=plan.timeout, env=env))
        return failed(evaluation, f"{tool.name} is not installed on this runner")
    # by its full path: the sandbox's own PATH may not hold the directory the host installed the tool in
    confined = ConfinedTool(starter, env, plan.timeout, {binary: installed})
    out_dir = f"{starter.box.tmp}/{plan.key}"
    confined.run([sys.executable, "-I", "-S", "-c", "import os, sys; os.makedirs(sys.argv[1], exist_ok=True)",
                  out_dir])
    wrapped = [*confined.located(tool.capture_argv(options, out_dir)), *argv]
    outcome = confined.start(wrapped, env={**env, **HARNESS_ENV})
    evaluation = finish(wrapped, outcome)
    run, stderr = evaluation.run, decode_output(bytes(outcome.stderr.data))
    if run is None or not (run.success and run.passed):
        reason = tool.failure(stderr)  # else the harness's own failure says more than the capture could
        return failed(evaluation, reason) if reason else evaluation
    capture = tool.collect(options, out_dir, confined, stderr)
    return with_capture(evaluation, plan.key, payload, system, options, tool.name, tool.settings(options),
                        capture, details=tuple(capture.files)[:2], essential=tool.essential)


def with_torch_profile(evaluation: EvalResult, plan_key: str, payload: RunPayload, system: SystemInfo,
                       options: ProfileOptions) -> EvalResult:
    run = evaluation.run
    if run is None or not (run.success and run.passed):
        return evaluation
    table = decode_report(run.result.get("benchmark.0.report", ""))
    if not table.strip():
        return failed(evaluation, "the harness wrote no profile report")
    rows = table_rows(table)  # [] when a problem's own harness writes its report in another form
    if rows and options.kernel_name:
        pattern = re.compile(options.kernel_name.removeprefix("regex:") if options.kernel_name.startswith("regex:")
                             else re.escape(options.kernel_name))
        rows = rows[:1] + [row for row in rows[1:] if row and pattern.search(row[0])]
    if rows and len(rows) < 2:
        return failed(evaluation, "torch.profiler recorded no operation" +
                      (f" matching {options.kernel_name!r}" if options.kernel_name else ""))
    settings = {"tool": TORCH_PROFILER, "kernel_name": options.kernel_name,
                "ignored": [name for name in ("launch_count", "launch_skip") if getattr(options, name)]}
    capture = Capture(files={DETAILS_TXT: table.encode(), DETAILS_CSV: table_csv(table, rows).encode()},
                      kernels=[row[0] for row in rows[1:]])
    return with_capture(evaluation, plan_key, payload, system, options, TORCH_PROFILER, settings, capture,
                        details=(DETAILS_TXT, DETAILS_CSV))


def with_capture(evaluation: EvalResult, plan_key: str, payload: RunPayload, system: SystemInfo,
                 options: ProfileOptions, profiler: str, settings: Mapping[str, object], capture: Capture,
                 details: tuple[str, ...], essential: tuple[str, ...] = ()) -> EvalResult:
    if capture.error:
        return failed(evaluation, capture.error)
    assert evaluation.run is not None
    index, case = profile_case(plan_key, payload)
    harness = {name: hashlib.sha256(text.encode()).hexdigest() for name, text in
               sorted({**payload.sources, **payload.headers}.items()) if name != payload.submission_file}
    host = {"gpu": system.gpu, "runtime": system.runtime, "torch": system.torch, "platform": system.platform}
    manifest = {
        "benchmark": {"index": index, "spec": evaluation.run.result.get("benchmark.0.spec", ""), "case": case},
        "capture": {**settings, "kernels": capture.kernels, "truncated": capture.truncated},
        "profiler": profiler, "system": system.model_dump(mode="json"),
        "fingerprint": fingerprint({"case": case, "capture": settings, "host": host, "harness": harness,
                                    "lang": payload.lang, "seed": payload.seed}),
        "capture_options": options.upstream_names(),
        "config_sha256": config_sha256(payload.model_dump(mode="json"), options.upstream_names()),
    }
    try:
        trace = bundle(case_directory(index, case), capture.files, (*details, *essential), manifest)
    except TraceTooLarge as too_large:
        return failed(evaluation, str(too_large))
    text = capture.files[details[0]].decode("utf-8", errors="replace")
    report = "\n".join(text.splitlines()[:REPORT_LINES])
    result = {**evaluation.run.result, "profiler": profiler, "benchmark.0.report": encode_report(report)}
    return evaluation.model_copy(update={"run": evaluation.run.model_copy(update={"result": result}),
                                         "profile": ProfileResult(profiler=profiler, trace=trace)})


def failed(evaluation: EvalResult, error: str) -> EvalResult:
    """The stage failed for `error`: a failed or empty capture is an error, never an empty success."""
    run = evaluation.run
    if run is None:
        return evaluation
    result = {**run.result, "error": error}
    return evaluation.model_copy(update={"run": run.model_copy(update={"passed": False, "result": result}),
                                         "profile": None})

