import torch

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    # Return a new float32 tensor holding a @ b, shape (a.shape[0], b.shape[1]).
    raise NotImplementedError
