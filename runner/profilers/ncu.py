"""Nsight Compute (`ncu`) on CUDA hosts.

The capture follows the harness's child processes (`--target-processes all`), keeps only kernels launched inside the
`custom_kernel` NVTX range (the harness's steady-state call of the submission; its warm-up calls run outside the
range), then applies the request's kernel-name filter (matching the form of the name `--kernel-name-base` says), launch
skip and launch count. The report is exported twice, as the details page's text and as its CSV.

The version is pinned to 2025.2.1: the 2026.2 release bundled with CUDA 13.3 gave NaN for many hardware counters on
B200 (upstream KernelBot found it while adding hosted profiling); 2025.2.1 gives valid occupancy, throughput, cache
and instruction counters there.
"""

from __future__ import annotations

import csv
import io

from runner.task import toolchain
from schemas.contracts import ProfileOptions

from .base import Capture, RunTool


def ncu_version() -> str:
    """The Nsight Compute release the NVIDIA image carries, from its toolchain manifest (runner/toolchains/)."""
    return str(toolchain.load("nvidia").data["system"]["ncu"])
NCU = "ncu"
REPORT = "profile.ncu-rep"
DETAILS_TXT = "ncu-details.txt"
DETAILS_CSV = "ncu-details.csv"
NVTX_RANGE = "custom_kernel/"
SECTION_SET = "full"
# Without a launch count, the steady-state call's first 10 matching kernels, as upstream KernelBot and popcorn-cli's
# `--ncu-launch-count` default: a cap, because each kernel is replayed once per counter pass (about 40 passes for the
# full set).
DEFAULT_LAUNCH_COUNT = 10


class NsightCompute:
    name = "Nsight Compute"
    essential: tuple[str, ...] = (REPORT,)  # popcorn-cli refuses an archive without its .ncu-rep

    @property
    def version(self) -> str:
        return ncu_version()

    def failure(self, stderr: str) -> str | None:
        errors = [line.removeprefix("==ERROR==").strip() for line in stderr.splitlines()
                  if line.startswith("==ERROR==")]
        return f"Nsight Compute failed: {errors[-1]}" if errors else None

    def settings(self, options: ProfileOptions) -> dict[str, object]:
        return {"tool": NCU, "version": ncu_version(), "nvtx_include": NVTX_RANGE, "set": SECTION_SET,
                "target_processes": "all", "kernel_name": options.kernel_name,
                "kernel_name_base": options.kernel_name_base or "function", "launch_skip": options.launch_skip, "launch_count": options.launch_count or DEFAULT_LAUNCH_COUNT}

    def capture_argv(self, options: ProfileOptions, out_dir: str) -> list[str]:
        argv = [NCU, "--target-processes", "all", "--nvtx", "--nvtx-include", NVTX_RANGE, "--set", SECTION_SET,
                "--import-source", "yes", "--launch-skip", str(options.launch_skip),
                "--launch-count", str(options.launch_count or DEFAULT_LAUNCH_COUNT)]
        if options.kernel_name:
            argv += ["--kernel-name", options.kernel_name]
        if options.kernel_name_base:
            argv += ["--kernel-name-base", options.kernel_name_base]
        return [*argv, "--export", f"{out_dir}/profile", "--force-overwrite", "--"]

    def collect(self, options: ProfileOptions, out_dir: str, tool: RunTool, tool_stderr: str) -> Capture:
        report = f"{out_dir}/{REPORT}"
        if REPORT not in tool.files(out_dir):
            return Capture(error=self.failure(tool_stderr) or empty_capture(options))
        code, text, stderr = tool.run([NCU, "--import", report, "--page", "details"])
        if code != 0:
            return Capture(error=f"Nsight Compute could not export the report (exit {code}): {last_line(stderr)}")
        code, table, stderr = tool.run([NCU, "--import", report, "--page", "details", "--csv"])
        if code != 0:
            return Capture(error=f"Nsight Compute could not export the CSV (exit {code}): {last_line(stderr)}")
        kernels = kernels_of(table)
        if not kernels:
            return Capture(error=empty_capture(options))
        capture = Capture(files={DETAILS_TXT: text.encode(), DETAILS_CSV: table.encode(),
                                 REPORT: tool.read(report)}, kernels=kernels)
        capture.truncated = len(kernels) >= (options.launch_count or DEFAULT_LAUNCH_COUNT)
        return capture


def empty_capture(options: ProfileOptions) -> str:
    chosen = f" named {options.kernel_name!r}" if options.kernel_name else ""
    if options.kernel_name and options.kernel_name_base:
        chosen += f" (matching its {options.kernel_name_base} name)"
    skipped = f" after skipping {options.launch_skip}" if options.launch_skip else ""
    return (f"Nsight Compute captured no kernel{chosen}{skipped} inside custom_kernel: the submission launched no "
            f"matching GPU kernel")


def kernels_of(table: str) -> list[str]:
    """Captured kernels in launch order, one per result ID, from the details CSV."""
    lines = [line for line in table.splitlines() if line.startswith('"')]  # ==PROF== / ==WARNING== lines aside
    seen: dict[str, str] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        if row.get("ID") is not None and row["ID"] not in seen:
            seen[row["ID"]] = row.get("Kernel Name", "")
    return list(seen.values())


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
