"""The example harness's worker keeps a steady heap across requests (docs/authoring.md, "Rules that make exploits
fail", rule 8): it runs with Python's collector off, so anything a request leaves in a reference cycle must be freed
by the worker itself, or every later call is timed on fresh pages and their faults count as the kernel's."""

from __future__ import annotations

import gc
import shutil
import sys

import pytest

from problems import PROBLEMS_ROOT

EXAMPLES = PROBLEMS_ROOT / "examples"
CYCLE_MIB, CALLS = 2, 60

# A submission whose every call leaves a 2 MiB tensor in a reference cycle (an object that refers to itself).
CYCLIC_SUBMISSION = f"""
import torch


class _Node:
    pass


def custom_kernel(data):
    node = _Node()
    node.self, node.scratch = node, torch.ones({CYCLE_MIB} << 18)  # float32: {CYCLE_MIB} MiB
    return data[0] + data[1]
"""


@pytest.fixture(scope="module")
def harness_modules():
    # The harness's modules import each other by bare name, as they do in a run directory: importable only once
    # their folder is on sys.path, and taken off it again so no other test imports them by accident.
    sys.path.insert(0, str(EXAMPLES))
    try:
        import harness_group
        import harness_wire
        yield harness_group, harness_wire
    finally:
        sys.path.remove(str(EXAMPLES))
        for name in ("harness_group", "harness_worker", "harness_wire"):
            sys.modules.pop(name, None)


def test_unpacking_a_frame_leaves_nothing_for_the_collector(harness_modules):
    torch = pytest.importorskip("torch")
    _, wire = harness_modules
    header, body = wire.pack(torch, (torch.zeros(4), [torch.ones(3)], {"n": 5}))
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        value = wire.unpack(torch, header, body)
        assert value[1][0].tolist() == [1.0, 1.0, 1.0] and value[2] == {"n": 5}
        del value, body
        assert gc.collect() == 0  # a frame's body held by a cycle would be leaked by the collector-less worker
    finally:
        if collecting:
            gc.enable()


def started_worker(harness_modules, tmp_path, submission: str):
    """A real worker process (the harness's own group) serving `submission`, ready for requests."""
    group_module, _ = harness_modules
    source = tmp_path / "source"
    source.mkdir()
    for name in ("harness_worker.py", "harness_wire.py"):
        shutil.copyfile(EXAMPLES / name, source / name)
    (source / "submission.py").write_text(submission)
    group = group_module.WorkerGroup(str(source), hidden=())
    if group.start(1 << 20) != "":
        group.stop()
        pytest.fail("the worker did not start")
    return group


def resident_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def test_cycles_a_kernel_leaves_are_freed_between_calls(harness_modules, tmp_path):
    """Through the real worker process: 60 calls that each leave 2 MiB in a cycle do not grow it by 120 MiB."""
    torch = pytest.importorskip("torch")
    _, wire = harness_modules
    group = started_worker(harness_modules, tmp_path, CYCLIC_SUBMISSION)
    try:
        pid = group.ranks[0][0].pid

        def call():
            frame = wire.pack(torch, (torch.ones(256), torch.ones(256)))
            replies, _, _ = group.exchange("call", [frame], 1 << 20)
            header, reply_body = replies[0]
            assert not header.get("error") and wire.unpack(torch, header, reply_body).tolist() == [2.0] * 256

        for _ in range(5):  # the worker's own buffers exist from here on
            call()
        before = resident_bytes(pid)
        for _ in range(CALLS):
            call()
        grown = resident_bytes(pid) - before
    finally:
        group.stop()
    assert grown < CALLS * (CYCLE_MIB << 20) // 4, f"the worker grew by {grown >> 20} MiB over {CALLS} calls"


# RGB to grayscale at 1024x1024, as the stock pmpp_v2 set times it: a 12 MiB input, a 12 MiB temporary, a 4 MiB
# output. The kernel reports the minor page faults it took, so the test sees what the timed window would have paid.
FAULT_COUNTING_SUBMISSION = """
import resource

import torch


def custom_kernel(data):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    gray = (data * torch.tensor([0.2989, 0.5870, 0.1140])).sum(dim=-1)
    return gray, torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before])
"""
TEMPORARY_PAGES = 1024 * 1024 * 3 * 4 // 4096
WARM_UP, TIMED = 10, 60


def test_a_kernels_temporaries_reuse_the_heap_whatever_the_requests_around_them_freed(harness_modules, tmp_path):
    """Through the real worker process: each request frees its body, the copy of its input and its packed output
    together. With glibc's default policy that gave the heap back on some calls, and the kernel's next temporary was
    faulted in again inside the timed window, on some calls and not others; a stock harness process, which keeps its
    input, did not. The worker now holds the heap as a long-running process's settles."""
    torch = pytest.importorskip("torch")
    _, wire = harness_modules
    group = started_worker(harness_modules, tmp_path, FAULT_COUNTING_SUBMISSION)
    faults = []
    try:
        for _ in range(WARM_UP + TIMED):
            frame = wire.pack(torch, torch.rand(1024, 1024, 3))
            replies, _, _ = group.exchange("call", [frame], 1 << 30)
            header, body = replies[0]
            assert not header.get("error"), header
            faults.append(int(wire.unpack(torch, header, body)[1]))
    finally:
        group.stop()
    # The heap still grows now and then while it settles (a few MiB on 1 call in 60 or so); the default policy faulted
    # the whole temporary in again on 8 to 14 calls in 60.
    faulted = sum(faults[WARM_UP:])
    assert faulted < 3 * TEMPORARY_PAGES, f"{faulted} pages faulted in over {TIMED} calls; per call: {faults}"
