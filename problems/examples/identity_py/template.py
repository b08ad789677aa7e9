import torch

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    # Return a copy of `data` that does not share its storage.
    raise NotImplementedError
