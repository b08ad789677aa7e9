"""System information for the result (harness.md §3.3), gathered without importing torch in the runner process:
torch's version comes from its installed distribution metadata, GPUs from nvidia-smi / rocm-smi."""

from __future__ import annotations

import functools
import importlib.metadata
import platform
import shutil
import socket
import subprocess

from schemas.contracts import SystemInfo

SMI_TIMEOUT_SECONDS = 20


@functools.lru_cache(maxsize=1)
def collect_system_info() -> SystemInfo:
    gpus, runtime = _query_gpus()
    return SystemInfo(
        gpu=gpus[0] if gpus else "cpu",
        device_count=len(gpus),
        cpu=cpu_model(),
        runtime=runtime,
        platform=platform.platform(),
        torch=torch_version(),
        hostname=socket.gethostname(),
    )


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
    """(GPU names, runtime) from nvidia-smi, else rocm-smi, else ([], "CPU")."""
    names = _smi_lines(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    if names:
        return names, "CUDA"
    rocm = _smi_lines(["rocm-smi", "--showproductname", "--csv"])
    # rocm-smi's CSV: a header line, then `card0,<series>,...` per device.
    devices = [line.split(",")[1] for line in rocm[1:] if line.startswith("card") and "," in line]
    if devices:
        return devices, "ROCm"
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
