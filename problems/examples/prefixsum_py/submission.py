# A correct example submission. It does not import torch at module level, which keeps the warm-up step cheap.


def custom_kernel(data):
    return data.cumsum(dim=0)
