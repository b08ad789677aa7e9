import math

import torch

from task import input_t, output_t
from utils import check_tensor


def generate_input(m: int, k: int, n: int, seed: int) -> input_t:
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=generator, dtype=torch.float32)
    b = torch.randn(k, n, generator=generator, dtype=torch.float32)
    return a, b


def ref_kernel(data: input_t) -> output_t:
    a, b = data
    return (a.double() @ b.double()).float()


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    # Each entry sums k products of standard normals: its magnitude is ~sqrt(k), and float32 rounding in any
    # summation order stays near k * 6e-8. 1e-5 * sqrt(k) leaves more than a tenfold margin for float32 and is far
    # below bfloat16/float16 errors (~1e-2 * sqrt(k)).
    k = data[0].shape[1]
    return check_tensor(output, ref_kernel(data), rtol=1e-4, atol=1e-5 * math.sqrt(max(k, 1)))
