from typing import TypedDict

import torch

input_t = torch.Tensor  # (rows, cols) float32 logits
output_t = torch.Tensor  # (rows, cols) float32, every row sums to 1


class TestSpec(TypedDict):
    rows: int
    cols: int
    scale: int  # the logits are standard normal samples times this factor
    seed: int
