"""tests/gpu: everything here is marked `gpu` and skipped on a host without a CUDA GPU (this one, in CI)."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - no usable torch/CUDA: no GPU
        return 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("gpu") and not gpu_count():
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU; this host has none"))
