"""Profile mode under Nsight Compute and rocprofv3 (fakes in the tools' formats, tests/support/fakes/gpu_profilers.py)
through runner.stages.execute, with a workload whose hot kernel comes late in the captured call."""

from __future__ import annotations

import base64
import csv
import io
import json
import sys
import zipfile
from pathlib import Path

import pytest

from runner.confinement.sandbox import RunSandbox, SandboxPolicy, sandbox_level
from runner.launching.starter import Starter
from runner.profilers.ncu import ncu_version
from runner.stages import execute as execute_module
from runner.stages.execute import execute
from runner.stages.profile_stage import ConfinedTool
from runner.task.profiling import decode_report
from schemas.contracts import ProfileOptions, RunPayload, SystemInfo
from tests.support.fakes import gpu_profilers

WORKLOAD = (Path(__file__).parents[1] / "support" / "fake_gpu_workload.py").read_text()
HOT = "hot_gemm(float const*, float const*, float*, int)"
SETUP = "elementwise_copy(float const*, float*, int)"


@pytest.fixture
def tools(tmp_path, monkeypatch):
    bin_dir = gpu_profilers.install(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path('/usr/bin')}:{Path('/bin')}")
    return bin_dir


def on_host(monkeypatch, runtime: str) -> None:
    gpu = "NVIDIA H100 80GB HBM3" if runtime == "CUDA" else "AMD Instinct MI300X"
    monkeypatch.setattr(execute_module, "collect_system_info",
                        lambda: SystemInfo(gpu=gpu, device_count=1, runtime=runtime, torch="2.13.0"))


def profile(options: ProfileOptions | None = None, benchmarks=({"n": 4096},)):
    payload = RunPayload(run_id="7.h100.profile", gpu="h100", lang="py", mode="profile", main="eval.py",
                         sources={"eval.py": WORKLOAD, "submission.py": "def custom_kernel(data): return data\n"},
                         benchmarks=list(benchmarks), harness="problem", submission_file="submission.py",
                         profile=options)
    return execute(payload, chain=False)


def artifact(stage) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(stage.profile.trace))) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def csv_kernels(table: bytes, key: str = "Kernel Name", ident: str = "ID") -> list[str]:
    rows = csv.DictReader(io.StringIO(table.decode()))
    return list({row[ident]: row[key] for row in rows}.values())


def test_ncu_captures_the_steady_state_call_with_its_late_hot_kernel(tools, monkeypatch):
    on_host(monkeypatch, "CUDA")
    result = profile(ProfileOptions(launch_count=64))  # past the default of 10, upstream's and popcorn-cli's
    assert result.success, result.error
    stage = result.runs["profile.0"]
    assert stage.run.passed, (stage.run.result, stage.run.stderr)
    assert stage.profile is not None, (stage.run.stdout, stage.run.stderr, stage.run.result)
    assert stage.profile.profiler == "Nsight Compute"
    files = artifact(stage)
    assert sorted(files) == ["profile.0-n-4096/manifest.json", "profile.0-n-4096/ncu-details.csv",
                             "profile.0-n-4096/ncu-details.txt", "profile.0-n-4096/profile.ncu-rep"]
    assert files["profile.0-n-4096/profile.ncu-rep"].startswith(gpu_profilers.REPORT_MAGIC)
    kernels = csv_kernels(files["profile.0-n-4096/ncu-details.csv"])
    # one call's kernels only (the three warm-up calls are outside custom_kernel), from the harness's child
    assert kernels == [SETUP] * 14 + [HOT, "epilogue(float*)"]
    assert kernels.index(HOT) >= 10  # where a capture of the first ten launches would have stopped
    manifest = json.loads(files["profile.0-n-4096/manifest.json"])
    assert manifest["capture"]["version"] == ncu_version() == "2025.2.1"
    assert manifest["capture"]["target_processes"] == "all" and manifest["capture"]["truncated"] is False
    assert manifest["benchmark"] == {"index": 0, "spec": "n: 4096", "case": {"n": 4096}}
    text = files["profile.0-n-4096/ncu-details.txt"].decode()
    assert f"  {HOT} (128, 1, 1)x(256, 1, 1)" in text and "Section: GPU Speed Of Light Throughput" in text
    assert decode_report(stage.run.result["benchmark.0.report"]).startswith("[")  # the details' head


def test_ncu_honours_kernel_name_launch_skip_and_launch_count(tools, monkeypatch):
    on_host(monkeypatch, "CUDA")
    named = profile(ProfileOptions(kernel_name="hot_gemm")).runs["profile.0"]
    assert csv_kernels(artifact(named)["profile.0-n-4096/ncu-details.csv"]) == [HOT]
    skipped = profile(ProfileOptions(launch_skip=14, launch_count=1)).runs["profile.0"]
    files = artifact(skipped)
    assert csv_kernels(files["profile.0-n-4096/ncu-details.csv"]) == [HOT]
    assert json.loads(files["profile.0-n-4096/manifest.json"])["capture"]["truncated"] is True
    regex = profile(ProfileOptions(kernel_name="regex:^(hot|epi)")).runs["profile.0"]
    assert csv_kernels(artifact(regex)["profile.0-n-4096/ncu-details.csv"]) == [HOT, "epilogue(float*)"]


def test_the_chosen_benchmark_case_alone_is_profiled_and_an_index_out_of_range_is_a_runner_error(tools, monkeypatch):
    on_host(monkeypatch, "CUDA")
    cases = ({"n": 1}, {"n": 2}, {"n": 3})
    result = profile(ProfileOptions(benchmark_index=2), benchmarks=cases)
    assert list(result.runs) == ["profile.2"]
    assert "profile.2-n-3/ncu-details.csv" in artifact(result.runs["profile.2"])
    wrong = profile(ProfileOptions(benchmark_index=3), benchmarks=cases)
    assert not wrong.success and "benchmark_index 3 is out of range" in wrong.error


def test_an_empty_capture_fails_the_stage(tools, monkeypatch):
    on_host(monkeypatch, "CUDA")
    stage = profile(benchmarks=({"kernels": 0},)).runs["profile.0"]
    assert not stage.run.passed and stage.profile is None
    assert stage.run.result["error"].startswith("Nsight Compute captured no kernel inside custom_kernel")
    named = profile(ProfileOptions(kernel_name="nothing_like_it")).runs["profile.0"]
    assert named.run.result["error"].startswith("Nsight Compute captured no kernel named 'nothing_like_it'")


def test_a_crashing_ncu_fails_the_stage_with_its_error(tmp_path, monkeypatch):
    bin_dir = gpu_profilers.install(tmp_path / "bin", crash="ncu")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    on_host(monkeypatch, "CUDA")
    stage = profile().runs["profile.0"]
    assert not stage.run.passed and stage.profile is None
    assert stage.run.result["error"] == ("Nsight Compute failed: LaunchFailed: the profiler could not collect "
                                         "metrics for this kernel")


def test_a_host_without_the_tool_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    on_host(monkeypatch, "CUDA")
    stage = profile().runs["profile.0"]
    assert not stage.run.passed
    assert stage.run.result["error"] == "Nsight Compute is not installed on this runner"


def test_rocprofv3_answers_in_the_same_shape_with_the_steady_state_window(tools, monkeypatch):
    on_host(monkeypatch, "ROCm")
    stage = profile().runs["profile.0"]
    assert stage.run.passed, (stage.run.result, stage.run.stderr)
    assert stage.profile.profiler == "rocprofv3"
    files = artifact(stage)
    details = {name.split("/", 1)[1] for name in files}
    assert {"rocprof-details.txt", "rocprof-details.csv", "manifest.json"} <= details
    assert any(name.startswith("raw/") and name.endswith("_kernel_trace.csv") for name in details)
    assert csv_kernels(files["profile.0-n-4096/rocprof-details.csv"], "Kernel_Name") == \
        [SETUP] * 14 + [HOT, "epilogue(float*)"]
    assert HOT in files["profile.0-n-4096/rocprof-details.txt"].decode()
    chosen = profile(ProfileOptions(kernel_name="hot_gemm", launch_count=1)).runs["profile.0"]
    assert csv_kernels(artifact(chosen)["profile.0-n-4096/rocprof-details.csv"], "Kernel_Name") == [HOT]
    skipped = profile(ProfileOptions(launch_skip=15, launch_count=5)).runs["profile.0"]
    assert csv_kernels(artifact(skipped)["profile.0-n-4096/rocprof-details.csv"], "Kernel_Name") == \
        ["epilogue(float*)"]


def test_rocprofv3_empty_and_crashing_captures_fail_the_stage(tmp_path, monkeypatch, tools):
    on_host(monkeypatch, "ROCm")
    empty = profile(benchmarks=({"kernels": 0},)).runs["profile.0"]
    assert empty.run.result["error"].startswith("rocprofv3 captured no kernel inside custom_kernel")
    crash_bin = gpu_profilers.install(tmp_path / "crash", crash="rocprofv3")
    monkeypatch.setenv("PATH", f"{crash_bin}:/usr/bin:/bin")
    crashed = profile().runs["profile.0"]
    assert crashed.run.result["error"] == ("rocprofv3 failed: rocprofv3: error: failed to initialize "
                                           "rocprofiler-sdk tool library")


def test_a_capture_written_in_the_full_sandbox_s_private_tmp_is_read_back_through_it():
    """In the full sandbox the run's TMPDIR is a tmpfs only the run's processes see; the capture's files are
    listed and read by confined helpers, which share it (the tool here is the interpreter writing like one)."""

    if sandbox_level()[0] != "full":
        pytest.skip(f"the full sandbox is not available here: {sandbox_level()[1]}")
    with RunSandbox(SandboxPolicy()) as box:
        assert box.level == "full"
        tool = ConfinedTool(Starter(box), box.environment({"PATH": "/usr/bin:/bin"}), 60)
        out_dir = f"{box.tmp}/profile.0"
        payload = bytes(range(256)) * 4096  # 1 MiB of every byte value: more than the stdout capture keeps
        write = ("import os, sys\nos.makedirs(sys.argv[1] + '/nested')\n"
                 "open(sys.argv[1] + '/nested/profile.ncu-rep', 'wb').write(bytes(range(256)) * 4096)\n"
                 "print('x' * 2_000_000)")
        outcome = tool.start([sys.executable, "-c", write, out_dir])
        assert outcome.exit_code == 0, bytes(outcome.stderr.data)
        assert not Path(out_dir).exists()  # invisible outside the sandbox
        assert tool.files(out_dir) == ["nested/profile.ncu-rep"]
        assert tool.read(f"{out_dir}/nested/profile.ncu-rep") == payload
        code, text, _ = tool.run([sys.executable, "-c", write.replace("os.makedirs", "print and os.makedirs")
                                  .replace("/nested')", "/again')"), out_dir])
        assert code == 0 and len(text) == 2_000_001  # a tool's output comes whole through the data pipe
