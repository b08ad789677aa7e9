"""Batched timing in the example harness's supervisor (docs/authoring.md, "Batched timing").

Some reference-kernels versions (the linalg eigh/qr/cholesky harnesses, nvidia's eval_better_bench*.py) time a
batch of inputs in one timing window and divide by the batch size; a small shape then scores what it costs inside a
stream of calls, not what one isolated call costs. When our harness replaces such a version, the runner ships that
version's rule as `harness_contract.json` (runner/task/harness_choice.py) and the benchmark and leaderboard stages time
the same way: one request carries a batch of inputs, the worker calls the kernel once per input inside one window,
and the sample is the window ÷ the batch size. The test and profile stages stay one input per call, as upstream.

What stays of our anti-cheat rules, and why it is sound:
* Fresh inputs per batch. Upstream times the same batch objects on every repeat, which is what caching by id() or
  by value (#104), batch-and-skip (#102) and replaying the previous repeat exploit. Here every input of every batch
  is generated from its own seed (harness_measure.mix_seed with the item index), never sent twice, and rebuilt in the
  worker as new objects: no cache keyed on anything the kernel sees can hit across batches, nor inside one batch
  (its inputs are distinct).
* Every output comes back, a sample is checked. The worker returns all outputs of the batch (plain tensors, copied
  out after the window), so it cannot know which of them matter. After the reply has arrived, the supervisor draws
  CHECKED_PER_BATCH positions with the OS's random source and checks those outputs against the pristine inputs; the
  first, untimed batch of a case is checked whole. A kernel that skips a fraction f of its inputs (computing only
  the first, say) survives one batch with probability about (1 - f) ** CHECKED_PER_BATCH, and a case runs at least
  MIN_SAMPLES batches. Checking a sample rather than everything keeps the supervisor's untimed work per batch
  bounded (upstream rechecks every output; an eigh checker on 50 inputs costs far more than the batch).
* The supervisor's cross-check (harness_measure.measure) compares the batch's window with the reported batch time,
  before the division, so patched timers and side threads are caught as for single calls.
* Outputs may not share storage with any input of the batch (except declared output buffers of their own input).
"""

from __future__ import annotations

import json
import os
import random

CONTRACT_FILE = "harness_contract.json"
CHECKED_PER_BATCH = 3
MAX_INPUTS = 64  # a contract asking for more is refused: the wire carries one batch per request


class BatchRule:
    """How many inputs one timing window holds: `max_inputs`, or fewer where `bytes_target` says so (the linalg
    versions: as many inputs as fit in bytes_target, counted by the first input's tensor bytes, at least one)."""

    def __init__(self, max_inputs: int, bytes_target: int | None):
        if not 1 <= max_inputs <= MAX_INPUTS or (bytes_target is not None and bytes_target < 1):
            raise ValueError(f"bad batch rule ({max_inputs}, {bytes_target})")
        self.max_inputs, self.bytes_target = max_inputs, bytes_target

    def count(self, torch, first_input) -> int:
        if self.bytes_target is None:
            return self.max_inputs
        size = tensor_bytes(torch, first_input)
        return max(1, min(self.max_inputs, self.bytes_target // size)) if size > 0 else 1


def load_rule(directory: str) -> BatchRule | None:
    """The batch rule the runner shipped beside eval.py, or None (one input per timed call)."""
    try:
        with open(os.path.join(directory, CONTRACT_FILE), encoding="utf-8") as handle:
            contract = json.load(handle)
    except FileNotFoundError:
        return None
    batch = contract.get("batch")
    if batch is None:
        return None
    return BatchRule(int(batch["max_inputs"]), None if batch.get("bytes_target") is None else int(batch["bytes_target"]))


def tensor_bytes(torch, value) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return sum(tensor_bytes(torch, item) for item in items)


def checked_positions(count: int, whole: bool) -> list[int]:
    """Which outputs of a batch the supervisor checks: all of them, or a sample drawn now (after the reply)."""
    if whole or count <= CHECKED_PER_BATCH:
        return list(range(count))
    return sorted(random.SystemRandom().sample(range(count), CHECKED_PER_BATCH))


def batch_buffers(paths: list, count: int) -> list:
    """The declared output buffers of each input of a batch, as paths into the batch (a list of inputs)."""
    return [[position, *path] for position in range(count) for path in paths]
