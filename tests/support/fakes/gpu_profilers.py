"""Stand-ins for Nsight Compute's `ncu` and ROCm's `rocprofv3`, installed under those names by
`install(bin_dir, ...)`; what the real tools do to a GPU program is replaced by a launch log.

The program under the tool (tests/support/fake_gpu_workload.py) cannot launch kernels on a CPU host; it appends what
it would do to `$FAKE_GPU_LAUNCHES`, one JSON line per event: `{"pid", "event": "launch"|"push"|"pop", "name"}`,
in order, from every process of it (the variable is inherited by its children, as the tools' injection is).

From that log each tool applies its own documented filters and writes files in its real formats:

* ncu: `--target-processes` (`application-only` keeps the direct child's launches), `--nvtx --nvtx-include R/`
  (launches inside the push/pop range R), `--kernel-name` (a name, or `regex:` and a pattern) matched against the
  form `--kernel-name-base` names: `function` (default: the bare function name), `demangled` (the whole logged name)
  or `mangled` (`_Z<length><function>`, a stand-in for the Itanium mangling),
  `--launch-skip`, `--launch-count`, `--export` (writes `<path>.ncu-rep`, opaque bytes here; nothing when no kernel
  was profiled, with `==WARNING== No kernels were profiled.`). `ncu --import R --page details [--csv]` prints the
  details page as text or as CSV in ncu's column layout.
* rocprofv3: `--kernel-trace --marker-trace --stats --output-format csv -d DIR -o %pid%` writes per process
  `<pid>_kernel_trace.csv`, `<pid>_marker_api_trace.csv` and `<pid>_kernel_stats.csv` with rocprofv3's columns;
  `--kernel-include-regex` keeps matching dispatches.

`config.json` beside the executables can make a tool crash (`{"crash": "ncu"}`): it then prints an `==ERROR==` line
(ncu) or an error line (rocprofv3), writes nothing and exits 1 after the program ran. `{"report_bytes": N}` makes
each `.ncu-rep` N random bytes longer, as real reports of the full section set run to megabytes. `nvidia_smi=NAME`
also installs an `nvidia-smi` that lists one GPU of that name, so the runner takes the host for a CUDA host.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

REPORT_MAGIC = b"NVIDIA Nsight Compute report (fake)\x00"
NCU_CSV_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
                   "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value")
SOL_METRICS = (("DRAM Frequency", "Ghz", "2.62"), ("SM Frequency", "Ghz", "1.75"), ("Elapsed Cycles", "cycle", "6,524"),
               ("Memory Throughput", "%", "71.94"), ("Duration", "us", "3.71"), ("Compute (SM) Throughput", "%", "12.40"))
KERNEL_TRACE_COLUMNS = ("Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id",
                        "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp", "LDS_Block_Size",
                        "Scratch_Size", "VGPR_Count", "Accum_VGPR_Count", "SGPR_Count", "Workgroup_Size_X",
                        "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z")
MARKER_COLUMNS = ("Domain", "Function", "Process_Id", "Thread_Id", "Correlation_Id", "Start_Timestamp",
                  "End_Timestamp")
STATS_COLUMNS = ("Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage", "MinNs", "MaxNs", "StdDev")


def install(bin_dir: Path, *, crash: str = "", report_bytes: int = 0, nvidia_smi: str = "") -> Path:
    """Write `ncu` and `rocprofv3` into `bin_dir` (to be put first on PATH), with a copy of this module beside them,
    so a sandboxed run that sees `bin_dir` alone still finds all the tools need."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    module = bin_dir / "fake_gpu_profilers.py"
    module.write_text(Path(__file__).read_text())
    (bin_dir / "config.json").write_text(json.dumps({"crash": crash, "report_bytes": report_bytes}))
    if nvidia_smi:
        smi = bin_dir / "nvidia-smi"
        smi.write_text(f"#!/bin/sh\necho {json.dumps(nvidia_smi)}\n")
        smi.chmod(0o755)
    for tool in ("ncu", "rocprofv3"):
        path = bin_dir / tool
        path.write_text(f"#!{sys.executable}\nimport importlib.util, sys\n"
                        f"spec = importlib.util.spec_from_file_location('fake_gpu_profilers', {str(module)!r})\n"
                        f"module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n"
                        f"sys.exit(module.main({tool!r}, {str(bin_dir)!r}, sys.argv[1:]))\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir


CONFIG: dict = {}


def _config() -> dict:
    return CONFIG


def _options(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    flags = {"--nvtx", "--force-overwrite", "--csv", "--kernel-trace", "--marker-trace", "--stats"}
    options, index = {}, 0
    while index < len(argv) and argv[index] != "--":
        name = argv[index]
        if name in flags:
            options[name] = "1"
            index += 1
        else:
            options[name] = argv[index + 1]
            index += 2
    return options, argv[index + 1:]


def _run_logged(command: list[str]) -> tuple[int, int, list[dict]]:
    """Run the program with the launch log; (exit code, its pid, the log's events)."""
    with tempfile.NamedTemporaryFile("r", suffix=".launches", delete=False) as log:
        name = log.name
    env = {**os.environ, "FAKE_GPU_LAUNCHES": name}
    process = subprocess.Popen(command, env=env, close_fds=False)  # the runner's result pipes pass through
    code = process.wait()
    with open(name, encoding="utf-8") as log:
        events = [json.loads(line) for line in log if line.strip()]
    os.unlink(name)
    return code, process.pid, events


def _launches(events: list[dict]) -> list[dict]:
    """Launches in order, each with the ranges open in its process at the time."""
    stacks: dict[int, list[str]] = {}
    found = []
    for event in events:
        stack = stacks.setdefault(event["pid"], [])
        if event["event"] == "push":
            stack.append(event["name"])
        elif event["event"] == "pop" and stack:
            stack.pop()
        elif event["event"] == "launch":
            found.append({**event, "ranges": list(stack)})
    return found


def _function(name: str) -> str:
    return name.split("(", 1)[0].split("<", 1)[0].split()[-1]


def _name_as(name: str, base: str) -> str:
    """A launch's name in the form `--kernel-name-base` names."""
    function = _function(name)
    return {"function": function, "demangled": name, "mangled": f"_Z{len(function)}{function}"}[base]


def ncu(argv: list[str]) -> int:
    options, command = _options(argv)
    if "--import" in options:
        return ncu_import(options)
    code, pid, events = _run_logged(command)
    if _config().get("crash") == "ncu":
        print("==ERROR== LaunchFailed: the profiler could not collect metrics for this kernel", file=sys.stderr)
        return 1
    launches = _launches(events)
    if options.get("--target-processes", "application-only") != "all":
        launches = [launch for launch in launches if launch["pid"] == pid]
    if "--nvtx" in options and "--nvtx-include" in options:
        wanted = options["--nvtx-include"].rstrip("/")
        launches = [launch for launch in launches if wanted in launch["ranges"]]
    if "--kernel-name" in options:
        pattern, base = options["--kernel-name"], options.get("--kernel-name-base", "function")
        launches = [launch for launch in launches if (re.search(pattern[6:], _name_as(launch["name"], base))
                                                      if pattern.startswith("regex:")
                                                      else _name_as(launch["name"], base) == pattern)]
    skip = int(options.get("--launch-skip", "0"))
    count = int(options["--launch-count"]) if "--launch-count" in options else None
    launches = launches[skip:] if count is None else launches[skip:skip + count]
    for launch in launches:
        print(f"==PROF== Profiling \"{_function(launch['name'])}\" - {launches.index(launch)}: 0%....50%....100% "
              f"- 40 passes")
    if not launches:
        print("==WARNING== No kernels were profiled.")
        return code
    report = Path(options["--export"] + ".ncu-rep")
    described = json.dumps(launches).encode()
    padding = os.urandom(64 + int(_config().get("report_bytes", 0)))
    report.write_bytes(REPORT_MAGIC + len(described).to_bytes(8, "big") + described + padding)
    print(f"==PROF== Report: {report}")
    return code


def ncu_import(options: dict[str, str]) -> int:
    data = Path(options["--import"]).read_bytes()
    if not data.startswith(REPORT_MAGIC):
        print(f"==ERROR== Failed to open report {options['--import']}", file=sys.stderr)
        return 1
    start = len(REPORT_MAGIC) + 8
    launches = json.loads(data[start:start + int.from_bytes(data[len(REPORT_MAGIC):start], "big")])
    if "--csv" in options:
        out = io.StringIO()
        writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(NCU_CSV_COLUMNS)
        for index, launch in enumerate(launches):
            for metric, unit, value in SOL_METRICS:
                writer.writerow([index, launch["pid"], "python3.11", "127.0.0.1", launch["name"], 1, 7,
                                 "(256, 1, 1)", "(128, 1, 1)", 0, "9.0", "GPU Speed Of Light Throughput", metric,
                                 unit, value])
        sys.stdout.write(out.getvalue())
        return 0
    rule = "    ----------------------- ----------- ------------"
    lines = []
    for pid in dict.fromkeys(launch["pid"] for launch in launches):
        lines.append(f"[{pid}] python3.11@127.0.0.1")
        for launch in (launch for launch in launches if launch["pid"] == pid):
            lines += [f"  {launch['name']} (128, 1, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 9.0",
                      "    Section: GPU Speed Of Light Throughput", rule,
                      "    Metric Name             Metric Unit Metric Value", rule]
            lines += [f"    {metric:<23} {unit:>11} {value:>12}" for metric, unit, value in SOL_METRICS]
            lines += [rule, ""]
    print("\n".join(lines))
    return 0


def rocprofv3(argv: list[str]) -> int:
    options, command = _options(argv)
    code, _, events = _run_logged(command)
    if _config().get("crash") == "rocprofv3":
        print("rocprofv3: error: failed to initialize rocprofiler-sdk tool library", file=sys.stderr)
        return 1
    out_dir = Path(options["-d"])
    out_dir.mkdir(parents=True, exist_ok=True)
    pattern = options.get("--kernel-include-regex")
    by_pid: dict[int, tuple[list, list]] = {}
    open_ranges: dict[int, list[tuple[str, int]]] = {}
    for clock, event in enumerate(events):
        stamp = 1_000_000 + clock * 1000
        kernels, markers = by_pid.setdefault(event["pid"], ([], []))
        if event["event"] == "push":
            open_ranges.setdefault(event["pid"], []).append((event["name"], stamp))
        elif event["event"] == "pop" and open_ranges.get(event["pid"]):
            name, started = open_ranges[event["pid"]].pop()
            markers.append(["MARKER_CORE_API", name, event["pid"], event["pid"], len(markers) + 1, started, stamp])
        elif event["event"] == "launch" and (pattern is None or re.search(pattern, event["name"])):
            kernels.append(["KERNEL_DISPATCH", 1, 1, 0, event["pid"], len(kernels) + 1, len(kernels) + 1,
                            event["name"], len(kernels) + 1, stamp, stamp + 500, 0, 0, 32, 0, 16, 256, 1, 1,
                            32768, 1, 1])
    for pid, (kernels, markers) in by_pid.items():
        _write_csv(out_dir / f"{pid}_kernel_trace.csv", KERNEL_TRACE_COLUMNS, kernels)
        _write_csv(out_dir / f"{pid}_marker_api_trace.csv", MARKER_COLUMNS, markers)
        names = sorted({row[7] for row in kernels})
        _write_csv(out_dir / f"{pid}_kernel_stats.csv", STATS_COLUMNS,
                   [[name, sum(1 for row in kernels if row[7] == name), 500, 500, 0, 500, 500, 0] for name in names])
    return code


def _write_csv(path: Path, columns: tuple[str, ...], rows: list[list]) -> None:
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    path.write_text(out.getvalue())


def main(tool: str, bin_dir: str, argv: list[str]) -> int:
    CONFIG.update(json.loads((Path(bin_dir) / "config.json").read_text()))
    return ncu(argv) if tool == "ncu" else rocprofv3(argv)
