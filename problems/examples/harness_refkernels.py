"""The reference-kernels adapter of the example harness (eval.py): what a problem in the standard reference-kernels
shape needs beyond the bundled problems' contract. The runner ships it beside eval.py when our harness judges such
a problem (runner/task/harness_choice.py); the bundled problems do not need it, and eval.py works without it.

Preallocated outputs: reference-kernels inputs may carry the output buffer (pmpp_v2 vectoradd gets (A, B, C) and
returns C). The worker refuses an output that shares storage with an input, so the supervisor finds the input
tensors the reference itself fills and returns, and tells the worker that returning exactly those is allowed
(docs/authoring.md, "The harness protocol": "storage not shared with any input except a declared output buffer").
"""

from __future__ import annotations


def leaves(torch, value, path=()):
    """(path, tensor) for every tensor in a nested tuple/list/dict input."""
    if isinstance(value, torch.Tensor):
        yield list(path), value
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from leaves(torch, item, (*path, index))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(torch, item, (*path, key))


def clone(torch, value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (tuple, list)):
        return type(value)(clone(torch, item) for item in value)
    if isinstance(value, dict):
        return {key: clone(torch, item) for key, item in value.items()}
    return value


def output_buffers(torch, reference, pristine) -> list[list]:
    """Paths of the input tensors that `reference.ref_kernel` writes its result into and returns (on a copy of
    `pristine`); empty when it returns new tensors or there is no ref_kernel."""
    ref_kernel = getattr(reference, "ref_kernel", None)
    if ref_kernel is None:
        return []
    copy = clone(torch, pristine)
    try:
        result = ref_kernel(copy)
    except Exception:  # noqa: BLE001 - the reference's own failure is reported by the checker, not here
        return []
    returned = [result] if isinstance(result, torch.Tensor) else \
        [item for item in result if isinstance(item, torch.Tensor)] if isinstance(result, (tuple, list)) else []
    return [path for path, leaf in leaves(torch, copy) if any(item is leaf for item in returned)]
