"""Peak memory bandwidth and compute of the GPUs boards run on, and the roofline floor they give a benchmark case
(docs/authoring.md). Pure.

A case that must move B bytes and perform F operations in a format the GPU computes at P operations per second
cannot finish faster than max(B / bandwidth, F / P): its roofline floor. A time below it was not measured honestly.

The figures are the vendors' datasheet peaks, dense (without structured sparsity), for the board variant the
catalogue's backends serve (SXM/OAM where a GPU comes in several). Bandwidth in GB/s (10^9 bytes), compute in
TFLOP/s (10^12 operations; TOPS for int8):

- T4: NVIDIA T4 Tensor Core GPU datasheet: 320 GB/s GDDR6; FP32 8.1, FP16 mixed 65, INT8 130.
- L4: NVIDIA L4 Tensor Core GPU datasheet: 300 GB/s; FP32 30.3, TF32 60, FP16/BF16 121, FP8 and INT8 242.5
  (half the sparse figures it lists).
- A100: NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM: 2,039 GB/s; FP64 tensor 19.5, FP32 19.5, TF32 156,
  FP16/BF16 312, INT8 624.
- H100: NVIDIA H100 Tensor Core GPU datasheet, SXM: 3.35 TB/s; FP64 tensor 67, FP32 67, TF32 494.5, FP16/BF16
  989.5, FP8 and INT8 1,979 (half the sparse figures).
- B200: NVIDIA HGX B200 datasheet, per GPU: 8 TB/s; FP64 40, TF32 1,100, FP16/BF16 2,250, FP8/FP6 and INT8
  4,500, FP4 9,000 (half the sparse figures); FP32 is not listed there, 80 stands in (above any published figure,
  so the floor stays a floor).
- MI250: AMD Instinct MI250 datasheet (OAM): 3.2768 TB/s; FP64 matrix 90.5, FP32 matrix 90.5, FP16/BF16 362.1,
  INT8 362.1.
- MI300: AMD Instinct MI300X datasheet: 5.3 TB/s; FP64 matrix 163.4, FP32 163.4, TF32 653.7, FP16/BF16 1,307.4,
  FP8 and INT8 2,614.9 (dense).
- MI355X: AMD Instinct MI355X datasheet: 8 TB/s; FP64 78.6, FP32 157.3, FP16/BF16 2,516.6, FP8 and INT8 5,033.2,
  MXFP6/MXFP4 10,066.3 (dense).

Catalogue names that stand for several devices (`L4x4`, `MI300x8`) or a site's runners (`B200_Nebius`, `NVIDIA`)
map to the device; a multi-GPU task's case counts its `world_size` devices. A catalogue entry may state its own
`peak` instead (services/dispatcher/catalogue.py), for a GPU not listed here or a variant that differs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from schemas.contracts import CaseValue, RooflineCase

# Measured times carry timer granularity and the datasheets round: a time counts as below the floor only when it is
# below the floor less this share.
FLOOR_SLACK = 0.1


class GpuPeak(BaseModel):
    """One device's peak memory bandwidth (GB/s) and compute per number format (TFLOP/s)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    bandwidth_gbs: float = Field(gt=0)
    tflops: dict[str, float] = Field(min_length=1)

    def compute_tflops(self, precision: str | None) -> float:
        """The peak for `precision`; for a format the device lacks (or none named) its fastest one, the lowest
        floor, so an undeclared format never holds an honest score."""
        if precision is not None and precision in self.tflops:
            return self.tflops[precision]
        return max(self.tflops.values())


def _peak(bandwidth_gbs: float, **tflops: float) -> GpuPeak:
    return GpuPeak(bandwidth_gbs=bandwidth_gbs, tflops=tflops)


DEVICES: dict[str, GpuPeak] = {
    "T4": _peak(320, fp32=8.1, fp16=65, int8=130),
    "L4": _peak(300, fp32=30.3, tf32=60, fp16=121, bf16=121, fp8=242.5, int8=242.5),
    "A100": _peak(2039, fp64=19.5, fp32=19.5, tf32=156, fp16=312, bf16=312, int8=624),
    "H100": _peak(3350, fp64=67, fp32=67, tf32=494.5, fp16=989.5, bf16=989.5, fp8=1979, int8=1979),
    "B200": _peak(8000, fp64=40, fp32=80, tf32=1100, fp16=2250, bf16=2250, fp8=4500, fp6=4500, int8=4500,
                  fp4=9000),
    "MI250": _peak(3276.8, fp64=90.5, fp32=90.5, fp16=362.1, bf16=362.1, int8=362.1),
    "MI300": _peak(5300, fp64=163.4, fp32=163.4, tf32=653.7, fp16=1307.4, bf16=1307.4, fp8=2614.9, int8=2614.9),
    "MI355X": _peak(8000, fp64=78.6, fp32=157.3, fp16=2516.6, bf16=2516.6, fp8=5033.2, int8=5033.2, fp6=10066.3,
                    fp4=10066.3),
}
# Catalogue names (docs/vendors.md) that are one of the devices above.
ALIASES = {"L4X4": "L4", "MI300X": "MI300", "MI300X8": "MI300", "B200_NEBIUS": "B200", "NVIDIA": "B200",
           "A100-80GB": "A100"}


def peak_of(gpu: str, overrides: Mapping[str, GpuPeak] | None = None) -> GpuPeak | None:
    """The GPU's peaks: the catalogue's own figures where it states them, else the table's; None when unknown (the
    CPU and unlisted GPUs: no floor)."""
    if overrides and gpu in overrides:
        return overrides[gpu]
    name = gpu.upper()
    return DEVICES.get(ALIASES.get(name, name))


def case_floor_ns(declared: RooflineCase, peak: GpuPeak, devices: int = 1) -> float:
    """The least time, in ns, a case can take on `devices` such GPUs."""
    memory_s = declared.bytes / (peak.bandwidth_gbs * 1e9 * devices)
    compute_s = declared.flops / (peak.compute_tflops(declared.precision) * 1e12 * devices)
    return max(memory_s, compute_s) * 1e9


def floors_ns(roofline: list[RooflineCase], benchmarks: list[dict[str, CaseValue]], peak: GpuPeak | None,
              multi_gpu: bool) -> list[float]:
    """Each benchmark case's floor in ns; [] without a declaration or known peaks."""
    if not roofline or peak is None or len(roofline) != len(benchmarks):
        return []
    floors = []
    for declared, case in zip(roofline, benchmarks, strict=True):
        world = case.get("world_size", 1) if multi_gpu else 1
        floors.append(case_floor_ns(declared, peak, world if isinstance(world, int) and world > 0 else 1))
    return [f if math.isfinite(f) else 0.0 for f in floors]
