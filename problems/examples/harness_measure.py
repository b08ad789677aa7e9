"""The timing method of the example harness's supervisor (eval.py): the seeds of generated inputs, the warm-up, the
no-op calibration and cross-check of docs/authoring.md, "The harness protocol", the stopping rule and the statistics of that section.

Shipped beside eval.py wherever it goes (the task.yml `files` of each bundled problem, runner/task/harness_choice.py for
reference-kernels problems) and hidden from the worker. No I/O; `request` is the supervisor's one request to the
worker (harness_supervisor.Harness.request): fresh inputs, one call, every output checked.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time

# No user code runs in this process; the worker binds and re-verifies its own timing references.
_perf_counter_ns, _monotonic = time.perf_counter_ns, time.monotonic

# (max samples, sum-of-samples budget in ns, wall-clock limit per case in s); CPU-sized, see eval.py's docstring.
LIMITS = {"benchmark": (200, 1_000_000_000, 2.0), "leaderboard": (1000, 2_000_000_000, 3.0)}
MIN_SAMPLES = 10
WARM_UP_CALLS, WARM_UP_NS = 3, 100_000_000
# Warm-up and benchmark-stage inputs start far from the leaderboard stage's iterations 1, 2, ... but public seeds
# (seed + 13 * iteration) stay below 2**32: torch seeds its CPU generator with a seed's low 32 bits only.
WARM_UP_ITERATION_BASE = 1 << 24
BENCHMARK_ITERATION_BASE = 1 << 20
# A case failed by the cross-check is measured once more (harness_supervisor.run_benchmarks), on inputs of its own:
# the same iterations again would let a submission that failed the first attempt on purpose answer the second from
# a cache of the first one's outputs. Attempt 1 of a stage lies above every attempt 0 and below the warm-up base.
RETRY_ITERATION_BASE = 1 << 22
# Public seeds of the further inputs of a batch (docs/authoring.md, "Batched timing"): 13 * (difference of two
# iterations) never reaches a multiple of 2**26 (iterations stay below 2**25), so no two inputs share a seed, and
# 49 items above the warm-up base still stay below 2**32.
ITEM_STRIDE = 1 << 26
# The supervisor-side cross-check (docs/authoring.md, "The harness protocol"): a sample is rejected when the time the
# supervisor measured exceeds the reported one by more than the allowance plus max(ABS, REL x reported); more than
# MAX_VIOLATING of the calls rejected fails the case. The allowance is twice the round trip of a request (the median
# of PINGS `echo` requests: an input sent and echoed, no kernel) plus once the cache flush every call makes before its
# kernel (the median of PINGS `ping` requests, which flush as a call does, less the round trip). Twice the round trip,
# because on a busy host its cost spreads widely (cold caches after each wake-up); the flush only once, since it is
# steady work, and doubling it would let a kernel hide as much again. For the same reason as the doubled round trip,
# this CPU harness fails a case only when more than half of its calls are rejected: an honest softmax on a 2-core host
# running the test suite had 31% of its calls rejected, an honest prefix sum once over 35%. A tighter share buys no
# safety: a rejected call never counts in the score, so what cheats only some of the time is scored by its honest
# calls; a patched timer or a side thread hiding its work is rejected on nearly every call, and more than half
# rejected also ends the case at once (the early out in measure).
PINGS, CROSS_CHECK_ABS_NS, CROSS_CHECK_REL, MAX_VIOLATING = 7, 100_000, 0.5, 0.5
# Each median of the worker's pings is capped, so that a worker slowing its pings down on purpose cannot buy itself
# room: at a fixed 2 ms, plus HONEST_TRIP_SLACK times what moving the request's bytes costs an honest peer, which
# the supervisor measures itself (harness_wire.honest_trip_ns). Without the second part, every call of a case whose
# inputs take longer than the fixed cap to travel (a 2048x2048 vector addition: 32 MiB in, 16 MiB back) was rejected,
# and a correct submission failed as "timer tampering". On a 2-core host the supervisor's own trip (a thread of it
# as the peer) came out at 1.0x a real worker's ping for 0.5 MiB and 1.6-2.3x for 8-32 MiB; the slack covers a
# worker slower than that on a busier moment.
OVERHEAD_CAP_NS, HONEST_TRIP_SLACK = 2_000_000, 1.5


def mix_seed(secret: int | None, seed: int, iteration: int, item: int = 0) -> int:
    """The seed of one generated input: input `item` of the batch of call `iteration` (item 0 when calls are not
    batched). Public runs step by 13 per iteration as upstream, and by ITEM_STRIDE per item; with a secret,
    HMAC-SHA256 keyed by the secret over (seed, iteration[, item]), truncated to 31 bits, so a mixed seed reveals
    nothing about the secret."""
    if secret is None:
        return seed + 13 * iteration + ITEM_STRIDE * item
    message = f"{seed}:{iteration}" if item == 0 else f"{seed}:{iteration}:{item}"
    digest = hmac.new(str(secret).encode(), message.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def timed_iteration(stage: str, sample: int, attempt: int = 0) -> int:
    """The input iteration of timed call `sample` (1-based) of a stage's `attempt` at a case; the leaderboard stage's
    first attempt keeps upstream's numbering."""
    return (BENCHMARK_ITERATION_BASE if stage == "benchmark" else 0) + RETRY_ITERATION_BASE * attempt + sample


def summarize(samples: list[int]) -> dict:
    """The statistics of docs/authoring.md, "The harness protocol" (ns)."""
    n = len(samples)
    ordered = sorted(samples)
    mean = sum(samples) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in samples) / (n - 1)) if n > 1 else 0.0
    half = n // 2
    median = ordered[half] if n % 2 else (ordered[half - 1] + ordered[half]) / 2
    j = 1 if n < 6 else max(1, math.floor(n / 2 - 0.98 * math.sqrt(n)))  # 95% CI of the median: [min, max] if n < 6
    k = n if n < 6 else min(n, math.ceil(1 + n / 2 + 0.98 * math.sqrt(n)))
    ci_low, ci_high = ordered[j - 1], ordered[k - 1]
    return {"runs": n, "mean": mean, "std": std, "err": std / math.sqrt(n), "best": ordered[0],
            "worst": ordered[-1], "median": median, "ci_low": ci_low, "ci_high": ci_high}


def converged(samples: list[int], total: int, total_squares: int) -> bool:
    n = len(samples)
    mean = total / n
    variance = max(total_squares - n * mean * mean, 0.0) / (n - 1)
    if mean <= 0 or math.sqrt(variance / n) / mean >= 0.001:
        return False
    stats = summarize(samples)  # only sorted once the cheap criterion holds
    return (stats["ci_high"] - stats["ci_low"]) / 2 < 0.005 * stats["median"]


def warm_up(request, case: dict) -> None:
    started, calls = _perf_counter_ns(), 0
    while calls < WARM_UP_CALLS or _perf_counter_ns() - started < WARM_UP_NS:
        request("call", case, WARM_UP_ITERATION_BASE + calls, timed=True)
        calls += 1


class Overhead:
    """The allowance of one request for this case (see the cross-check above): from the latest PINGS `ping` requests
    (the round trip, and the flush where calls flush) and, where they flush (the supervisor's measurement says
    `flushed`: the example worker flushes on every device), as many `echo` requests (the round trip alone); each
    median capped so that a worker slowing its requests down cannot buy itself room. Where nothing is flushed it is
    twice the pings' median: an echo would cost what a ping does, and the difference of two noisy medians would only
    widen the allowance.

    Calibrated before the timed calls, and pinged again after each call the cross-check rejects: a host that became
    busier since the calibration (another job starting on a shared machine) makes every request cost more, pings
    included, and an honest call must not be blamed for it. A call that hid work stays rejected, since its pings
    cost what they did; slowing the pings down on purpose buys at most the caps, as at calibration."""

    def __init__(self, request, case: dict) -> None:
        self._request, self._case, self._pinged, self._flushed = request, case, 0, False
        self._windows: dict[str, list[int]] = {"ping": [], "echo": [], "honest": []}
        for _ in range(PINGS):
            self.ping()

    def ping(self) -> None:
        for kind in ("ping", "echo") if self._flushed else ("ping",):
            ok, _, measured = self._request(kind, self._case, WARM_UP_ITERATION_BASE - 1 - self._pinged)
            self._pinged += 1
            if ok:
                self._windows[kind] = [*self._windows[kind], window(measured)][-PINGS:]
                if kind == "ping":  # the supervisor measures its own trip beside pings only (one per pair is enough)
                    self._windows["honest"] = [*self._windows["honest"], measured.get("honest_trip") or 0][-PINGS:]
                self._flushed = self._flushed or measured.get("flushed") is True

    @property
    def cap(self) -> int:
        """The most a median of the worker's pings may count for (see OVERHEAD_CAP_NS)."""
        return OVERHEAD_CAP_NS + round(HONEST_TRIP_SLACK * _median(self._windows["honest"]))

    def median(self, kind: str) -> int:
        cap = self.cap
        return min(_median(self._windows[kind]) if self._windows[kind] else cap, cap)

    @property
    def ns(self) -> int:
        if not self._windows["echo"]:
            return 2 * self.median("ping")
        trip = self.median("echo")
        return 2 * trip + max(self.median("ping") - trip, 0)


def _median(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0


def hides_work(measured: dict, elapsed: int, allowance: int) -> bool:
    """The cross-check: the supervisor saw the request take longer than the reported time allows."""
    return window(measured) - elapsed > allowance + max(CROSS_CHECK_ABS_NS, CROSS_CHECK_REL * elapsed)


def window(measured: dict) -> int:
    """What the supervisor saw a request take: wall time, or less where the worker's CPU clock, read once the worker
    blocked again (harness_group.WorkerGroup.cpu_ns), says so (the wall clock also counts the worker waiting for a
    core on a busy host)."""
    cpu = measured["cpu"]
    return measured["wall"] if cpu is None else min(measured["wall"], cpu)


def measure(request, stage: str, case: dict, attempt: int = 0) -> tuple[list[int], str, int]:
    """(samples in ns, error, calls rejected by the cross-check) of one case of a timed stage; each attempt at a case
    draws its own inputs."""
    max_samples, sample_budget, wall_limit = LIMITS[stage]
    ok, message, _ = request("call", case, 0)  # one untimed correctness check first
    if not ok:
        return [], message or "check failed", 0
    overhead = Overhead(request, case)
    samples: list[int] = []
    started, violating = _monotonic(), 0
    total = total_squares = 0
    for sample in range(1, 2 * max_samples + 1):
        # A fresh input every call, checked right after.
        ok, message, measured = request("call", case, timed_iteration(stage, sample, attempt), timed=True)
        if not ok:
            return [], f"timed call {sample}: {message or 'check failed'}", violating
        elapsed = measured["ns"]  # of the whole batch, where the stage times batches: cross-checked as a whole
        if hides_work(measured, elapsed, overhead.ns):
            overhead.ping()
            if not hides_work(measured, elapsed, overhead.ns):
                continue  # the host, not the call: every request costs more now; the call is dropped, not counted
            violating += 1
            if violating >= MIN_SAMPLES and violating > sample // 2:  # early out: hiding work shows at once
                return [], (f"unsynchronized work or timer tampering detected: {violating} of {sample} calls "
                            f"took longer than the worker reported"), violating
            continue
        elapsed = round(elapsed / measured.get("inputs", 1))  # the time of one input (of a batch)
        samples.append(elapsed)
        total, total_squares = total + elapsed, total_squares + elapsed * elapsed
        if len(samples) >= max_samples or (len(samples) >= MIN_SAMPLES and (
                total > sample_budget or _monotonic() - started > wall_limit
                or converged(samples, total, total_squares))):
            break
    if violating > MAX_VIOLATING * (len(samples) + violating):
        return [], f"unsynchronized work or timer tampering detected: {violating} calls took longer than reported", violating
    return samples, "", violating
