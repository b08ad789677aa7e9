from typing import TypedDict

import torch

input_t = tuple[torch.Tensor, torch.Tensor]  # A (m, k), B (k, n), float32
output_t = torch.Tensor  # C (m, n), float32


class TestSpec(TypedDict):
    m: int
    k: int
    n: int
    seed: int
