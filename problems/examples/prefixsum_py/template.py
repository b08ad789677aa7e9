import torch

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    # data: (size,) float32. Return out with out[i] = data[0] + ... + data[i].
    raise NotImplementedError
