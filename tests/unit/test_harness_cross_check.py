"""The example harness's cross-check (problems/examples/harness_measure.py) with a scripted worker: a host that gets
busier after the calibration costs an honest submission nothing, a submission that hides work on every call fails."""

from __future__ import annotations

import importlib.util

import pytest

from problems import PROBLEMS_ROOT

KERNEL_NS, PING_NS, BUSY_NS, HIDDEN_NS = 100_000, 50_000, 400_000, 400_000
# The L2 flush before each call on a GPU (twice the L2, then a synchronise) and work a kernel hides, both a fraction
# of a millisecond: the hidden work is more than the round trip and the margin, less than a second flush.
FLUSH_NS, SMALL_HIDDEN_NS = 300_000, 200_000


def harness_module(name: str):
    spec = importlib.util.spec_from_file_location(name, PROBLEMS_ROOT / "examples" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def measure_module():
    return harness_module("harness_measure")


class ScriptedWorker:
    """Answers the supervisor's requests as `harness_supervisor.Harness.request` does: each request costs the worker
    `trip` outside the kernel (moving the input in and the answer out), plus `busy` once the host got busier, plus
    `flush` on every request but an echo (the cache flush before a call), plus `hidden` on calls (work the kernel left
    for after its timer stopped), plus `slowed` on pings (a worker widening its allowance on purpose). A ping's
    `honest_trip` is what the supervisor measured moving the same bytes itself."""

    def __init__(self, busy_after_pings: int | None = None, hidden: int = 0, flush: int = 0, trip: int = PING_NS,
                 honest_trip: int | None = None, slowed: int = 0) -> None:
        self.busy_after_pings, self.hidden, self.flush, self.pings, self.calls = busy_after_pings, hidden, flush, 0, 0
        self.trip, self.honest_trip, self.slowed = trip, honest_trip, slowed

    def extra(self, kind: str) -> int:
        busy = self.busy_after_pings is not None and self.pings >= self.busy_after_pings
        return self.trip + (BUSY_NS if busy else 0) + (0 if kind == "echo" else self.flush)

    def __call__(self, kind: str, case: dict, iteration: int, timed: bool = False):
        if kind in ("ping", "echo"):
            self.pings += 1
            cost = self.extra(kind) + self.slowed
            return True, "", {"ns": 0, "wall": cost, "cpu": cost, "inputs": 1, "flushed": self.flush > 0,
                              "honest_trip": self.honest_trip}
        self.calls += 1
        cost = KERNEL_NS + self.extra(kind) + self.hidden
        return True, "", {"ns": KERNEL_NS, "wall": cost, "cpu": cost, "inputs": 1, "flushed": self.flush > 0}


def test_an_honest_call_on_a_host_that_got_busier_after_the_calibration_is_not_blamed(measure_module):
    worker = ScriptedWorker(busy_after_pings=measure_module.PINGS)  # every request costs more once calibrated
    samples, error, violating = measure_module.measure(worker, "benchmark", {})
    assert error == "" and samples and set(samples) == {KERNEL_NS}
    assert violating <= measure_module.PINGS // 2 + 1  # until the latest pings' median caught up with the host
    assert worker.pings > measure_module.PINGS  # pinged again after rejected calls


def test_a_call_hiding_work_stays_rejected_however_often_the_host_is_pinged(measure_module):
    worker = ScriptedWorker(hidden=HIDDEN_NS)
    samples, error, violating = measure_module.measure(worker, "benchmark", {})
    assert samples == [] and error.startswith("unsynchronized work or timer tampering detected")
    assert violating >= measure_module.MIN_SAMPLES


def test_a_steady_host_is_calibrated_once(measure_module):
    worker = ScriptedWorker()
    samples, error, violating = measure_module.measure(worker, "benchmark", {})
    assert error == "" and violating == 0 and worker.pings == measure_module.PINGS and samples  # no echoes: no flush


def test_an_honest_call_that_flushes_a_large_cache_first_is_not_blamed(measure_module):
    worker = ScriptedWorker(flush=FLUSH_NS)
    samples, error, violating = measure_module.measure(worker, "benchmark", {})
    assert error == "" and violating == 0 and set(samples) == {KERNEL_NS}
    assert worker.pings == 2 * measure_module.PINGS - 1  # the first ping shows the flush; echoes from then on


def test_the_cache_flush_is_allowed_once_so_it_gives_a_kernel_no_room_to_hide_work(measure_module):
    """The flush is in every call's window; doubling it with the round trip would let this kernel pass."""
    worker = ScriptedWorker(flush=FLUSH_NS, hidden=SMALL_HIDDEN_NS)
    samples, error, violating = measure_module.measure(worker, "benchmark", {})
    assert samples == [] and error.startswith("unsynchronized work or timer tampering detected")


# A case whose inputs take 30 ms to travel to the worker and back (tens of MiB), far above the fixed 2 ms cap.
LARGE_TRIP_NS = 30_000_000


def test_an_honest_call_whose_inputs_take_longer_to_travel_than_the_fixed_cap_is_not_blamed(measure_module):
    """Before the cap counted the bytes moved, every call of such a case was rejected as timer tampering."""
    assert LARGE_TRIP_NS > measure_module.OVERHEAD_CAP_NS
    worker = ScriptedWorker(trip=LARGE_TRIP_NS, honest_trip=LARGE_TRIP_NS // 2)
    samples, error, violating = measure_module.measure(worker, "benchmark", {})
    assert error == "" and violating == 0 and set(samples) == {KERNEL_NS}


def test_the_bound_is_the_supervisors_own_measure_so_slowed_pings_buy_no_room_beyond_it(measure_module):
    """A worker slowing its pings by a second widens its allowance only up to the cap that the supervisor measured
    itself: work hidden beyond that is caught however slow the pings."""
    honest = LARGE_TRIP_NS // 2
    cap = measure_module.OVERHEAD_CAP_NS + measure_module.HONEST_TRIP_SLACK * honest
    hidden = 2 * cap  # more than the capped allowance (twice the cap) leaves room for, less than slowed pings would
    worker = ScriptedWorker(trip=LARGE_TRIP_NS, honest_trip=honest, slowed=1_000_000_000, hidden=hidden)
    samples, error, violating = measure_module.measure(worker, "benchmark", {})
    assert samples == [] and error.startswith("unsynchronized work or timer tampering detected")
    honest_worker = ScriptedWorker(trip=LARGE_TRIP_NS, honest_trip=honest, slowed=1_000_000_000)
    assert measure_module.measure(honest_worker, "benchmark", {})[1] == ""


def test_the_supervisors_own_trip_moves_the_frames_and_a_failed_one_counts_for_nothing_without_hanging():
    """harness_wire.honest_trip_ns: the bound the supervisor measures itself. A frame its peer thread cannot rebuild
    ends the trip at once with 0 (the fixed cap alone), instead of leaving the supervisor blocked on a pipe."""
    torch = pytest.importorskip("torch")
    wire = harness_module("harness_wire")
    frames = [wire.pack(torch, (torch.arange(1 << 18, dtype=torch.float32), torch.ones(3)), exact=False)]
    assert wire.honest_trip_ns(torch, frames, 64 << 20) > 0
    unreadable = [({"tree": {"tensor": 0}}, bytearray(1 << 20))]  # no blob table: unpack refuses it
    assert wire.honest_trip_ns(torch, unreadable, 64 << 20) == 0
