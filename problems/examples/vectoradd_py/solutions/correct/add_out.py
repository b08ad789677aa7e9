import torch


def custom_kernel(data):
    a, b = data
    out = torch.empty_like(a)
    torch.add(a, b, out=out)
    return out
