# A correct example submission. It does not import torch at module level, which keeps the warm-up step cheap.


def custom_kernel(data):
    r, g, b = data.unbind(dim=-1)
    return 0.2989 * r + 0.5870 * g + 0.1140 * b
