"""Helpers shared by the example problems' reference modules."""

from __future__ import annotations

import torch


def check_tensor(output, expected: torch.Tensor, *, rtol: float = 1e-5, atol: float = 1e-8) -> tuple[bool, str]:
    """Exact type, dtype, device and shape, then values within `atol + rtol * |expected|`."""
    if type(output) is not torch.Tensor:  # subclasses could defer their work into the checker
        return False, f"expected a torch.Tensor, got {type(output).__name__}"
    for attribute in ("dtype", "device", "shape"):
        if getattr(output, attribute) != getattr(expected, attribute):
            got, want = getattr(output, attribute), getattr(expected, attribute)
            return False, f"{attribute} mismatch: got {got}, expected {want}"
    close = torch.isclose(output, expected, rtol=rtol, atol=atol)
    if not bool(close.all()):
        mismatches = (~close).nonzero()
        first = tuple(mismatches[0].tolist())
        return False, (f"{mismatches.shape[0]} mismatched elements; first at {first}: "
                       f"got {output[first].item()}, expected {expected[first].item()}")
    return True, ""
