import torch


def custom_kernel(data):
    out = torch.empty_like(data)
    out.copy_(data)
    return out
