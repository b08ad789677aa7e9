import torch


def custom_kernel(data):
    return torch.zeros_like(data)
