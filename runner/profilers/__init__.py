"""The profilers of profile mode (docs/quickstart.md, "Profiling"): Nsight Compute on CUDA hosts, rocprofv3 on ROCm
hosts, torch.profiler (inside the harness) on CPU hosts. Each answers in the same shape: a details text, a details
CSV, the tool's raw output where it has one, and a manifest, zipped per benchmark case (runner/profilers/bundle.py).
"""

from __future__ import annotations

from .base import Capture, CaptureTool
from .ncu import NsightCompute
from .rocprof import Rocprofv3

__all__ = ["Capture", "CaptureTool", "NsightCompute", "Rocprofv3", "tool_for"]


def tool_for(runtime: str) -> CaptureTool | None:
    """The external capture tool of a host's runtime; None where the harness's torch.profiler answers alone."""
    if runtime == "CUDA":
        return NsightCompute()
    if runtime == "ROCm":
        return Rocprofv3()
    return None
