from typing import TypedDict

import torch

input_t = torch.Tensor  # (height, width, 3) float32, channels last
output_t = torch.Tensor  # (height, width) float32


class TestSpec(TypedDict):
    height: int
    width: int
    seed: int
