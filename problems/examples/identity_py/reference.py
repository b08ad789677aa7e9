import torch

from task import input_t, output_t
from utils import check_tensor


def generate_input(size: int, seed: int) -> input_t:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(size, generator=generator, dtype=torch.float32)


def ref_kernel(data: input_t) -> output_t:
    return data.clone()


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    return check_tensor(output, ref_kernel(data), rtol=0.0, atol=0.0)
