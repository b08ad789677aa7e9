# A correct example submission. It does not import torch at module level, which keeps the warm-up step cheap.


def custom_kernel(data):
    a, b = data
    return a @ b
