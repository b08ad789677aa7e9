"""Which hardware differences make two scores incomparable (docs/authoring.md). Pure.

What matters for a GPU board: each GPU's model, driver, CUDA/ROCm version, the application (locked) SM clock, the
power limit, ECC and MIG; for a CPU board (no GPU): the CPU model, its core count and the scaling governor. Never the
UUID, the host name, temperatures or the current clocks: two machines of the same configuration are comparable.
"""

from __future__ import annotations

from schemas.contracts import SystemInfo

GPU_FIELDS = ("name", "driver", "runtime_version", "sm_clock_mhz", "power_limit_w", "ecc", "mig")
CPU_FIELDS = ("model", "cores", "governor")
MISMATCH = "measured on hardware that differs from the board's"


def hardware_of(system: SystemInfo) -> dict[str, str]:
    """The comparable part of a result's fingerprint, flat; {} when the result carries none (older runners)."""
    fingerprint = system.fingerprint
    if not fingerprint.source:
        return {}
    if fingerprint.gpus:
        return {f"gpu{gpu.index}.{name}": str(getattr(gpu, name)) for gpu in fingerprint.gpus for name in GPU_FIELDS
                if getattr(gpu, name) not in (None, "")}
    return {f"cpu.{name}": str(getattr(fingerprint.cpu, name)) for name in CPU_FIELDS
            if getattr(fingerprint.cpu, name) not in (None, "", 0)}


def _devices(hardware: dict[str, str]) -> int:
    return len({key.split(".")[0] for key in hardware if key.startswith("gpu")})


def differences(reference: dict[str, str], other: dict[str, str]) -> list[str]:
    """What differs, as `field: reference ≠ other`: the number of GPUs, and every field both sides know (one host
    may not report what another does, nvidia-smi having no CUDA version); nothing when either side is unknown."""
    if not reference or not other:
        return []
    found = [f"gpus: {_devices(reference)} ≠ {_devices(other)}"] if _devices(reference) != _devices(other) else []
    return found + [f"{key}: {reference[key]} ≠ {other[key]}"
                    for key in sorted(reference.keys() & other.keys()) if reference[key] != other[key]]


def mismatch_reason(gpu: str, found: list[str]) -> str:
    return f"{MISMATCH} on {gpu} ({'; '.join(found)})"
