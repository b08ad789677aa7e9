"""tests/gpu: everything here is marked `gpu` and skipped on a host without a CUDA GPU (this one, in CI).

A host whose driver lists NVIDIA GPUs that torch cannot use (a CPU-only build of torch, a broken CUDA install) is a
GPU host missing a prerequisite: its tests fail, naming it, instead of skipping."""

from __future__ import annotations

import functools
import shutil
import subprocess

import pytest


@functools.cache
def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - no usable torch/CUDA: no GPU
        return 0


@functools.cache
def driver_gpus() -> int:
    """The GPUs the NVIDIA driver lists, whatever torch sees; 0 without a driver."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        done = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in done.stdout.splitlines()) if done.returncode == 0 else 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("gpu") and not gpu_count() and not driver_gpus():
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU; this host has none"))


@pytest.fixture(autouse=True)
def _torch_sees_the_drivers_gpus() -> None:
    if driver_gpus() and not gpu_count():
        pytest.fail(f"the driver lists {driver_gpus()} GPU(s) but torch sees none: install a CUDA build of torch")
