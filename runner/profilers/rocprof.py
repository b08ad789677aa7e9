"""rocprofv3 on ROCm hosts, answering in Nsight Compute's shape: details text, details CSV and the raw output.

rocprofv3 traces every kernel dispatch (`--kernel-trace`) and the ROCTX ranges (`--marker-trace`; torch's NVTX calls
are ROCTX calls on ROCm) of the harness and its children. It has no range filter of its own, so the steady-state
window is applied here: only dispatches that start inside a `custom_kernel` range count, then the kernel-name
filter (`--kernel-include-regex`), the launch skip and the launch count, in dispatch order.
"""

from __future__ import annotations

import csv
import io
import re

from runner.task import toolchain
from schemas.contracts import ProfileOptions

from .base import Capture, RunTool


def rocprof_version() -> str:
    """rocprofv3 is the rocprofiler-sdk of the AMD image's ROCm release, from its toolchain manifest."""
    return f"rocprofv3 (rocprofiler-sdk of ROCm {toolchain.load('amd').data['system']['rocm']})"

ROCPROFV3 = "rocprofv3"
DETAILS_TXT = "rocprof-details.txt"
DETAILS_CSV = "rocprof-details.csv"
RANGE = "custom_kernel"
DEFAULT_LAUNCH_COUNT = 64
COLUMNS = ("Kernel_Name", "Dispatch_Id", "Agent_Id", "Queue_Id", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z",
           "Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z", "LDS_Block_Size", "Scratch_Size",
           "VGPR_Count", "SGPR_Count", "Start_Timestamp", "End_Timestamp")


def name_pattern(kernel_name: str) -> str:
    """Nsight Compute's `regex:` prefix takes a pattern; a plain name matches where it appears in the name."""
    return kernel_name.removeprefix("regex:") if kernel_name.startswith("regex:") else re.escape(kernel_name)


class Rocprofv3:
    name = "rocprofv3"
    essential: tuple[str, ...] = ()  # the details hold what a client reads; the raw CSVs may go

    @property
    def version(self) -> str:
        return rocprof_version()

    def failure(self, stderr: str) -> str | None:
        errors = [line.strip() for line in stderr.splitlines() if "rocprof" in line and "error" in line.lower()]
        return f"rocprofv3 failed: {errors[-1]}" if errors else None

    def settings(self, options: ProfileOptions) -> dict[str, object]:
        return {"tool": ROCPROFV3, "version": rocprof_version(), "range": RANGE, "kernel_name": options.kernel_name,
                "launch_skip": options.launch_skip, "launch_count": options.launch_count or DEFAULT_LAUNCH_COUNT}

    def capture_argv(self, options: ProfileOptions, out_dir: str) -> list[str]:
        argv = [ROCPROFV3, "--kernel-trace", "--marker-trace", "--stats", "--output-format", "csv",
                "-d", out_dir, "-o", "%pid%"]
        if options.kernel_name:
            argv += ["--kernel-include-regex", name_pattern(options.kernel_name)]
        return [*argv, "--"]

    def collect(self, options: ProfileOptions, out_dir: str, tool: RunTool, tool_stderr: str) -> Capture:
        written = {name: tool.read(f"{out_dir}/{name}") for name in tool.files(out_dir)}
        traces = [data for name, data in written.items() if name.endswith("_kernel_trace.csv")]
        if not traces and self.failure(tool_stderr):
            return Capture(error=self.failure(tool_stderr) or "")
        ranges = [(int(row["Start_Timestamp"]), int(row["End_Timestamp"]))
                  for name, data in written.items() if name.endswith("_marker_api_trace.csv")
                  for row in read_rows(data) if row.get("Function") == RANGE]
        dispatches = sorted((row for data in traces for row in read_rows(data)
                             if any(start <= int(row["Start_Timestamp"]) <= end for start, end in ranges)),
                            key=lambda row: int(row["Start_Timestamp"]))
        count = options.launch_count or DEFAULT_LAUNCH_COUNT
        chosen = dispatches[options.launch_skip:options.launch_skip + count]
        if not chosen:
            named = f" matching {options.kernel_name!r}" if options.kernel_name else ""
            return Capture(error=f"rocprofv3 captured no kernel{named} inside {RANGE}: the submission launched no "
                                 f"matching GPU kernel")
        raw = {f"raw/{name}": data for name, data in written.items()}
        files = {DETAILS_TXT: details_text(chosen).encode(), DETAILS_CSV: details_csv(chosen).encode(), **raw}
        return Capture(files=files, kernels=[row["Kernel_Name"] for row in chosen],
                       truncated=len(dispatches) > options.launch_skip + count)


def read_rows(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8", errors="replace"))))


def duration_ns(row: dict[str, str]) -> int:
    return int(row["End_Timestamp"]) - int(row["Start_Timestamp"])


def details_csv(rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(["ID", *COLUMNS, "Duration_Ns"])
    for index, row in enumerate(rows):
        writer.writerow([index, *(row.get(column, "") for column in COLUMNS), duration_ns(row)])
    return out.getvalue()


def details_text(rows: list[dict[str, str]]) -> str:
    lines = []
    for index, row in enumerate(rows):
        grid = ", ".join(row.get(f"Grid_Size_{axis}", "") for axis in "XYZ")
        block = ", ".join(row.get(f"Workgroup_Size_{axis}", "") for axis in "XYZ")
        lines += [f"  [{index}] {row['Kernel_Name']} ({grid})x({block}), Agent {row.get('Agent_Id', '')}, "
                  f"Queue {row.get('Queue_Id', '')}",
                  f"    Duration                      ns {duration_ns(row):>14,}",
                  f"    VGPRs                            {row.get('VGPR_Count', ''):>14}",
                  f"    SGPRs                            {row.get('SGPR_Count', ''):>14}",
                  f"    LDS per workgroup            bytes {row.get('LDS_Block_Size', ''):>12}",
                  f"    Scratch per work-item        bytes {row.get('Scratch_Size', ''):>12}", ""]
    return "\n".join(lines)
