"""System information for the result (docs/authoring.md), gathered without importing torch in the runner process:
torch's version comes from its installed distribution metadata, GPUs from nvidia-smi, else amd-smi / rocm-smi
(runner.host.rocm_devices), and the hardware fingerprint from NVML (runner.host.nvml), amd-smi or rocm-smi, and the
host's cpufreq files."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path

from runner.host import nvml, rocm_devices
from schemas.contracts import CpuFingerprint, Fingerprint, GpuFingerprint, SystemInfo

SMI_TIMEOUT_SECONDS = 20
CPUFREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq")
ROCM_VERSION_FILE = Path("/opt/rocm/.info/version")


@functools.lru_cache(maxsize=1)
def collect_system_info() -> SystemInfo:
    gpus, runtime = _query_gpus()
    fingerprint = hardware_fingerprint(runtime, gpus)
    if not gpus and fingerprint.gpus:  # NVML sees GPUs that nvidia-smi did not list (no binary on the PATH)
        gpus, runtime = [gpu.name for gpu in fingerprint.gpus], "CUDA"
    return SystemInfo(
        gpu=gpus[0] if gpus else "cpu",
        device_count=len(gpus),
        cpu=cpu_model(),
        runtime=runtime,
        platform=platform.platform(),
        torch=torch_version(),
        hostname=socket.gethostname(),
        fingerprint=fingerprint,
    )


def hardware_fingerprint(runtime: str, gpu_names: list[str], cpufreq: Path = CPUFREQ) -> Fingerprint:
    """GPUs from NVML where it answers; ROCm GPUs from amd-smi or rocm-smi, with the ROCm version; always the CPU."""
    cpu = cpu_fingerprint(cpufreq)
    if runtime != "ROCm":
        gpus = nvml.gpu_fingerprints()
        if gpus:
            return Fingerprint(source="nvml", gpus=gpus, cpu=cpu)
    if runtime == "ROCm":
        version = _read(ROCM_VERSION_FILE)
        amd = rocm_devices.amd_gpus()
        if amd:
            return Fingerprint(source=amd[0].source, cpu=cpu, gpus=[GpuFingerprint(
                index=gpu.index, name=gpu.name, uuid=gpu.uuid, driver=gpu.driver, runtime_version=version,
                memory_mib=gpu.memory_mib) for gpu in amd])
        return Fingerprint(source="rocm-smi", cpu=cpu, gpus=[
            GpuFingerprint(index=i, name=name, runtime_version=version) for i, name in enumerate(gpu_names)])
    if gpu_names:
        gpus = smi_fingerprints() or [GpuFingerprint(index=i, name=name) for i, name in enumerate(gpu_names)]
        return Fingerprint(source="nvidia-smi", cpu=cpu, gpus=gpus)
    return Fingerprint(source="none", cpu=cpu)


SMI_FIELDS = ("index", "name", "uuid", "driver_version", "clocks.applications.graphics",
              "clocks.applications.memory", "clocks.max.sm", "power.limit", "ecc.mode.current", "memory.total",
              "mig.mode.current")


def smi_fingerprints() -> list[GpuFingerprint]:
    """The fingerprint from nvidia-smi where NVML's Python binding is missing (no CUDA version: the query has none)."""
    found = []
    for line in _smi_lines(["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"]):
        values = [value.strip() for value in line.split(",")]
        if len(values) != len(SMI_FIELDS):
            continue
        row = {key: (None if value.strip("[]").lower() in ("n/a", "not supported", "") else value)
               for key, value in zip(SMI_FIELDS, values, strict=True)}
        found.append(GpuFingerprint(
            index=_number(row["index"], int) or 0, name=row["name"] or "", uuid=row["uuid"] or "",
            driver=row["driver_version"] or "", sm_clock_mhz=_number(row["clocks.applications.graphics"], int),
            memory_clock_mhz=_number(row["clocks.applications.memory"], int),
            max_sm_clock_mhz=_number(row["clocks.max.sm"], int), power_limit_w=_number(row["power.limit"], float),
            ecc=(row["ecc.mode.current"] or "").lower(), memory_mib=_number(row["memory.total"], int),
            mig=(row["mig.mode.current"] or "").lower()))
    return found


def _number(text: str | None, kind: type) -> int | float | None:
    try:
        return kind(float(text)) if text is not None else None
    except ValueError:
        return None


def cpu_fingerprint(cpufreq: Path = CPUFREQ, cpuinfo_path: str = "/proc/cpuinfo") -> CpuFingerprint:
    """Model, core count, the scaling governor and frequency of cpu0 (cpufreq in kHz; cpuinfo's MHz otherwise)."""
    current = _khz_as_mhz(_read(cpufreq / "scaling_cur_freq"))
    if current is None:
        current = _cpuinfo_mhz(cpuinfo_path)
    return CpuFingerprint(model=cpu_model(cpuinfo_path), cores=os.cpu_count() or 0,
                          governor=_read(cpufreq / "scaling_governor"), frequency_mhz=current,
                          max_frequency_mhz=_khz_as_mhz(_read(cpufreq / "cpuinfo_max_freq")))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def _khz_as_mhz(text: str) -> float | None:
    return int(text) / 1000 if text.isdigit() else None


def _cpuinfo_mhz(cpuinfo_path: str) -> float | None:
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "cpu MHz":
                    return float(value)
    except (OSError, ValueError):
        return None
    return None


def torch_version() -> str:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return ""


def cpu_model(cpuinfo_path: str = "/proc/cpuinfo") -> str:
    """The cpuinfo `model name`, or the `vendor_id` when the model is unknown; platform.processor() elsewhere."""
    fields: dict[str, str] = {}
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
                if not line.strip() and fields:
                    break  # the first processor block is enough
    except OSError:
        return platform.processor()
    model = fields.get("model name", "")
    if not model or model.lower() == "unknown":
        return fields.get("vendor_id", "") or platform.processor()
    return model


def _query_gpus() -> tuple[list[str], str]:
    """(GPU names, runtime) from nvidia-smi, else amd-smi or rocm-smi, else ([], "CPU")."""
    names = _smi_lines(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    if names:
        return names, "CUDA"
    amd = rocm_devices.amd_gpus()  # amd-smi, else rocm-smi
    if amd:
        return [gpu.name for gpu in amd], "ROCm"
    return [], "CPU"


def _smi_lines(argv: list[str]) -> list[str]:
    if shutil.which(argv[0]) is None:
        return []
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=SMI_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]
