"""NVML through `nvidia-ml-py` (module `pynvml`): the GPUs' fingerprint and their clock/thermal telemetry.

Every entry point degrades to "no answer" (None or []) when the package, the driver or a GPU is missing, and every
field to None when the device does not support its query, so a runner without a GPU never fails here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from schemas.contracts import GpuFingerprint, TelemetrySample

# Clock-event reasons that slow a measurement down. Idle, application-clock and sync-boost settings are not.
SLOWDOWNS = (
    ("nvmlClocksThrottleReasonSwPowerCap", "sw-power-cap"),
    ("nvmlClocksThrottleReasonHwSlowdown", "hw-slowdown"),
    ("nvmlClocksThrottleReasonSwThermalSlowdown", "sw-thermal-slowdown"),
    ("nvmlClocksThrottleReasonHwThermalSlowdown", "hw-thermal-slowdown"),
    ("nvmlClocksThrottleReasonHwPowerBrakeSlowdown", "hw-power-brake-slowdown"),
)
_lock = threading.Lock()
_initialised = False


def _nvml() -> Any | None:
    """The initialised pynvml module, or None where NVML cannot answer (no package, no driver, no GPU)."""
    global _initialised
    try:
        import pynvml
    except ImportError:
        return None
    with _lock:
        if not _initialised:
            try:
                pynvml.nvmlInit()
            except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...: no NVML on this host
                return None
            _initialised = True
    return pynvml


def _ask(call: Callable[..., Any], *args: Any) -> Any:
    """One NVML query; None when the device does not support it (or it fails)."""
    try:
        return call(*args)
    except Exception:  # noqa: BLE001 - NVMLError_NotSupported and kin: the field is simply absent
        return None


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def _cuda_version(nvml: Any) -> str:
    version = _ask(nvml.nvmlSystemGetCudaDriverVersion)  # e.g. 12040 -> "12.4"
    return f"{version // 1000}.{version % 1000 // 10}" if isinstance(version, int) and version > 0 else ""


def _handles(nvml: Any) -> list[Any]:
    count = _ask(nvml.nvmlDeviceGetCount) or 0
    return [handle for index in range(count) if (handle := _ask(nvml.nvmlDeviceGetHandleByIndex, index)) is not None]


def _mode(value: Any) -> str:
    if isinstance(value, (tuple, list)):  # (current, pending)
        value = value[0]
    return "" if value is None else ("enabled" if value else "disabled")


def gpu_fingerprints() -> list[GpuFingerprint] | None:
    """Every GPU's fingerprint, or None when NVML is unavailable."""
    nvml = _nvml()
    if nvml is None:
        return None
    driver, cuda = _text(_ask(nvml.nvmlSystemGetDriverVersion)), _cuda_version(nvml)
    found = []
    for index, handle in enumerate(_handles(nvml)):
        power_mw = _ask(nvml.nvmlDeviceGetPowerManagementLimit, handle)
        memory = _ask(nvml.nvmlDeviceGetMemoryInfo, handle)
        found.append(GpuFingerprint(
            index=index, name=_text(_ask(nvml.nvmlDeviceGetName, handle)),
            uuid=_text(_ask(nvml.nvmlDeviceGetUUID, handle)), driver=driver, runtime_version=cuda,
            sm_clock_mhz=_ask(nvml.nvmlDeviceGetApplicationsClock, handle, nvml.NVML_CLOCK_SM),
            memory_clock_mhz=_ask(nvml.nvmlDeviceGetApplicationsClock, handle, nvml.NVML_CLOCK_MEM),
            max_sm_clock_mhz=_ask(nvml.nvmlDeviceGetMaxClockInfo, handle, nvml.NVML_CLOCK_SM),
            power_limit_w=power_mw / 1000 if isinstance(power_mw, (int, float)) else None,
            ecc=_mode(_ask(nvml.nvmlDeviceGetEccMode, handle)),
            memory_mib=memory.total // (1024 * 1024) if memory is not None else None,
            mig=_mode(_ask(nvml.nvmlDeviceGetMigMode, handle)),
        ))
    return found


def throttle_reasons(nvml: Any, mask: int | None) -> list[str]:
    if not mask:
        return []
    return [name for constant, name in SLOWDOWNS if mask & getattr(nvml, constant, 0)]


def telemetry() -> list[TelemetrySample] | None:
    """Each GPU's temperature, clocks, power and slowdown reasons now; None when NVML is unavailable."""
    nvml = _nvml()
    if nvml is None:
        return None
    samples = []
    for index, handle in enumerate(_handles(nvml)):
        power_mw = _ask(nvml.nvmlDeviceGetPowerUsage, handle)
        samples.append(TelemetrySample(
            index=index, temperature_c=_ask(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU),
            sm_clock_mhz=_ask(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM),
            memory_clock_mhz=_ask(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_MEM),
            power_w=power_mw / 1000 if isinstance(power_mw, (int, float)) else None,
            throttle_reasons=throttle_reasons(nvml, _ask(nvml.nvmlDeviceGetCurrentClocksThrottleReasons, handle)),
        ))
    return samples


def reset() -> None:
    """Forget the initialisation (tests swap the pynvml module)."""
    global _initialised
    with _lock:
        _initialised = False
