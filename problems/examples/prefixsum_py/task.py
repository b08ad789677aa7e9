from typing import TypedDict

import torch

input_t = torch.Tensor  # (size,) float32
output_t = torch.Tensor  # (size,) float32, the inclusive scan


class TestSpec(TypedDict):
    size: int
    seed: int
