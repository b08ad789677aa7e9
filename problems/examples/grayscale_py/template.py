import torch

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    # data: (height, width, 3) float32 RGB, channels last.
    # Return a new (height, width) tensor holding 0.2989 R + 0.5870 G + 0.1140 B.
    raise NotImplementedError
