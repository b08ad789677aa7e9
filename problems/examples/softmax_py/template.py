import torch

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    # data: (rows, cols) float32. Return the softmax of every row, computed without overflow.
    raise NotImplementedError
