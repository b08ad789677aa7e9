"""The hardware fingerprint on every result and the telemetry around timed stages (docs/authoring.md).

No GPU exists here: the GPU branch runs against a fake `pynvml` module (the Python seam of nvidia-ml-py) holding a
small NVML of two GPUs; the CPU branch runs for real, through runner.stages.execute and its subprocesses.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from runner.host import nvml, sysinfo
from runner.stages.execute import execute
from services.core.presentation.reports import report
from tests.support.fakes.host import FakeHost

TIMED_HARNESS = """
import os, sys
out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
stage = sys.argv[1]
if stage == "test":
    out.write("test-count: 1\\ntest.0.spec: size: 1\\ntest.0.status: pass\\ncheck: pass\\n")
else:
    out.write("benchmark-count: 1\\nbenchmark.0.spec: size: 1\\nbenchmark.0.runs: 10\\nbenchmark.0.mean: 1000\\n"
              "benchmark.0.std: 1\\nbenchmark.0.err: 1\\nbenchmark.0.best: 999\\nbenchmark.0.worst: 1001\\n"
              "check: pass\\n")
"""


class NotSupported(Exception):
    """pynvml.NVMLError_NotSupported's stand-in."""


def fake_pynvml(*, throttle_mask: int = 0, temperatures=(41, 83), init_error: Exception | None = None):
    """An NVML of two H100s: the second runs hot; ECC and MIG queries are unsupported on it."""
    module = types.ModuleType("pynvml")
    module.NVML_CLOCK_SM, module.NVML_CLOCK_MEM, module.NVML_TEMPERATURE_GPU = 1, 2, 0
    module.nvmlClocksThrottleReasonGpuIdle = 0x1
    module.nvmlClocksThrottleReasonSwPowerCap = 0x4
    module.nvmlClocksThrottleReasonHwSlowdown = 0x8
    module.nvmlClocksThrottleReasonSwThermalSlowdown = 0x20
    module.nvmlClocksThrottleReasonHwThermalSlowdown = 0x40
    module.nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x80
    module.calls = []

    def init():
        module.calls.append("init")
        if init_error is not None:
            raise init_error

    def unsupported_on_second(value):
        def query(handle, *args):
            if handle == 1:
                raise NotSupported()
            return value
        return query

    module.nvmlInit = init
    module.nvmlDeviceGetCount = lambda: 2
    module.nvmlDeviceGetHandleByIndex = lambda index: index
    module.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    module.nvmlSystemGetCudaDriverVersion = lambda: 12040
    module.nvmlDeviceGetName = lambda handle: b"NVIDIA H100 80GB HBM3"  # older bindings answer bytes
    module.nvmlDeviceGetUUID = lambda handle: f"GPU-0000000{handle}-aaaa"
    module.nvmlDeviceGetApplicationsClock = lambda handle, clock: 1755 if clock == 1 else 2619
    module.nvmlDeviceGetMaxClockInfo = lambda handle, clock: 1980
    module.nvmlDeviceGetPowerManagementLimit = lambda handle: 700_000
    module.nvmlDeviceGetEccMode = unsupported_on_second((1, 1))
    module.nvmlDeviceGetMigMode = unsupported_on_second((0, 0))
    module.nvmlDeviceGetMemoryInfo = lambda handle: types.SimpleNamespace(total=80 * 1024**3)
    module.nvmlDeviceGetTemperature = lambda handle, sensor: temperatures[handle]
    module.nvmlDeviceGetClockInfo = lambda handle, clock: (1410 if handle else 1755) if clock == 1 else 2619
    module.nvmlDeviceGetPowerUsage = lambda handle: 312_500
    module.nvmlDeviceGetCurrentClocksThrottleReasons = lambda handle: throttle_mask if handle == 1 else 0x1
    return module


@pytest.fixture
def install_nvml(monkeypatch):
    def install(module):
        monkeypatch.setitem(sys.modules, "pynvml", module)
        nvml.reset()
        sysinfo.collect_system_info.cache_clear()
        return module

    yield install
    nvml.reset()
    sysinfo.collect_system_info.cache_clear()


def test_nvml_fingerprints_every_gpu(install_nvml):
    install_nvml(fake_pynvml())
    first, second = nvml.gpu_fingerprints()
    assert first.model_dump() == {
        "index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-00000000-aaaa", "driver": "550.54.15",
        "runtime_version": "12.4", "sm_clock_mhz": 1755, "memory_clock_mhz": 2619, "max_sm_clock_mhz": 1980,
        "power_limit_w": 700.0, "ecc": "enabled", "memory_mib": 81920, "mig": "disabled"}
    assert (second.uuid, second.ecc, second.mig) == ("GPU-00000001-aaaa", "", "")  # unsupported: left empty


def test_telemetry_reports_slowdowns_but_not_idle(install_nvml):
    install_nvml(fake_pynvml(throttle_mask=0x40 | 0x4 | 0x1))
    cool, hot = nvml.telemetry()
    assert (cool.temperature_c, cool.sm_clock_mhz, cool.power_w, cool.throttle_reasons) == (41, 1755, 312.5, [])
    assert (hot.temperature_c, hot.sm_clock_mhz) == (83, 1410)
    assert hot.throttle_reasons == ["sw-power-cap", "hw-thermal-slowdown"]


@pytest.mark.parametrize("missing", ["no package", "no driver"])
def test_without_nvml_everything_degrades_to_no_answer(install_nvml, monkeypatch, missing):
    if missing == "no package":
        monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
        nvml.reset()
    else:
        install_nvml(fake_pynvml(init_error=RuntimeError("NVML Shared Library Not Found")))
    assert nvml.gpu_fingerprints() is None and nvml.telemetry() is None
    fingerprint = sysinfo.hardware_fingerprint("CPU", [])
    assert fingerprint.source == "none" and fingerprint.gpus == []


def test_cpu_fingerprint_reads_cpufreq(tmp_path: Path):
    (tmp_path / "scaling_governor").write_text("performance\n")
    (tmp_path / "scaling_cur_freq").write_text("3400000\n")
    (tmp_path / "cpuinfo_max_freq").write_text("3700000\n")
    cpu = sysinfo.cpu_fingerprint(tmp_path)
    assert (cpu.governor, cpu.frequency_mhz, cpu.max_frequency_mhz) == ("performance", 3400.0, 3700.0)
    assert cpu.cores >= 1 and cpu.model
    bare = sysinfo.cpu_fingerprint(tmp_path / "absent")  # no cpufreq (a VM): cpuinfo's MHz, no governor
    assert bare.governor == "" and bare.max_frequency_mhz is None


def test_every_cpu_result_carries_a_fingerprint_and_timed_stages_their_telemetry(tiny_payload, install_nvml,
                                                                                  monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    nvml.reset()
    sysinfo.collect_system_info.cache_clear()
    result = execute(tiny_payload(TIMED_HARNESS, mode="leaderboard", benchmarks=[{"size": 1}]))
    assert result.success and set(result.runs) == {"test", "benchmark", "leaderboard"}
    assert result.system.fingerprint.source == "none" and result.system.fingerprint.cpu.cores >= 1
    assert result.runs["test"].telemetry is None
    for stage in ("benchmark", "leaderboard"):
        telemetry = result.runs[stage].telemetry
        assert telemetry is not None and telemetry.source == "" and not telemetry.throttled
    text = report("cpu", "local", "leaderboard", secret=False, result=result.model_dump(mode="json"))
    assert "* CPU cores: " in text and "throttl" not in text.lower()


def test_a_run_measured_while_throttling_is_flagged(tiny_payload, install_nvml):
    install_nvml(fake_pynvml(throttle_mask=0x40))
    result = execute(tiny_payload(TIMED_HARNESS, mode="leaderboard", benchmarks=[{"size": 1}]))
    assert result.system.fingerprint.source == "nvml"
    assert [gpu.uuid for gpu in result.system.fingerprint.gpus] == ["GPU-00000000-aaaa", "GPU-00000001-aaaa"]
    telemetry = result.runs["leaderboard"].telemetry
    assert telemetry.source == "nvml" and telemetry.throttled and telemetry.throttle_reasons == ["hw-thermal-slowdown"]
    assert [s.temperature_c for s in telemetry.before] == [41, 83] and len(telemetry.after) == 2
    dumped = result.model_dump(mode="json")
    public = report("H100", "local", "leaderboard", secret=False, result=dumped)
    assert "> ⚠ GPU throttled during leaderboard (hw-thermal-slowdown)" in public
    assert "⚠ Measured while the GPU was throttling (hw-thermal-slowdown)" in public
    assert "driver 550.54.15, CUDA/ROCm 12.4, SM clock 1755 MHz (max 1980), power limit 700.0 W, ECC enabled" \
        in public
    secret = report("H100", "local", "leaderboard", secret=True, result=dumped)
    assert "> ⚠ GPU throttled during leaderboard" in secret and "Running on" not in secret


def test_without_the_nvml_binding_nvidia_smi_answers(tmp_path: Path, monkeypatch):
    """A host whose image lacks nvidia-ml-py: the fingerprint comes from nvidia-smi's query (a fake binary here)."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n"
                   "case \"$1\" in --query-gpu=name) echo 'NVIDIA H100 80GB HBM3';;\n"
                   "  --query-gpu=index,*) echo '0, NVIDIA H100 80GB HBM3, GPU-5e1f, 550.54.15, 1755, 2619, 1980, "
                   "700.00, Enabled, 81559, [N/A]';;\n  *) exit 1;;\nesac\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    nvml.reset()
    sysinfo.collect_system_info.cache_clear()
    try:
        info = sysinfo.collect_system_info()
    finally:
        sysinfo.collect_system_info.cache_clear()
    assert (info.gpu, info.runtime, info.fingerprint.source) == ("NVIDIA H100 80GB HBM3", "CUDA", "nvidia-smi")
    [gpu] = info.fingerprint.gpus
    assert (gpu.uuid, gpu.driver, gpu.sm_clock_mhz, gpu.max_sm_clock_mhz, gpu.power_limit_w, gpu.ecc, gpu.mig,
            gpu.memory_mib) == ("GPU-5e1f", "550.54.15", 1755, 1980, 700.0, "enabled", "", 81559)


def _rocm_host(tmp_path: Path, monkeypatch, tools: tuple[str, ...]) -> None:
    """An MI300X host: ROCm's tools (stand-ins answering their JSON modes) on PATH, no nvidia-smi, no NVML."""
    host = FakeHost(tmp_path)
    host.amd_gpus(2, tools=tools)
    monkeypatch.setenv("PATH", f"{host.bin}:/usr/bin:/bin")
    monkeypatch.setenv("KB_FAKE_ROCM", str(host.state / "rocm.json"))
    monkeypatch.setitem(sys.modules, "pynvml", None)
    nvml.reset()
    sysinfo.collect_system_info.cache_clear()


@pytest.mark.parametrize("tools", [("amd-smi", "rocm-smi"), ("rocm-smi",)], ids=["amd-smi", "rocm-smi only"])
def test_an_amd_host_is_fingerprinted_by_amd_smi_falling_back_to_rocm_smi(tmp_path: Path, monkeypatch, tools):
    _rocm_host(tmp_path, monkeypatch, tools)
    try:
        info = sysinfo.collect_system_info()
    finally:
        sysinfo.collect_system_info.cache_clear()
    assert (info.gpu, info.device_count, info.runtime) == ("AMD Instinct MI300X", 2, "ROCm")
    assert info.fingerprint.source == tools[0]
    first, second = info.fingerprint.gpus
    assert (first.index, first.uuid, first.driver) == (0, "00ff74a1-0000-1000-80ab-5c1e2f3a4b00", "6.8.5")
    assert second.uuid.endswith("4b01")
    assert first.memory_mib == (196592 if tools[0] == "amd-smi" else None)  # rocm-smi's query has no VRAM size
