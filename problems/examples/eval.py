"""KernelBot example harness for Python problems: `python eval.py <test|benchmark|leaderboard|profile> <casefile>`.

Speaks the POPCORN_FD protocol of harness.md §4: `key: value` lines on the result pipe, a single `check: pass|fail`
at the end, exit 0 (all passed), 112 (a case failed), 111 (no usable POPCORN_FD), 113 (bad case file or seed),
2 (usage). Bulk samples go to the optional POPCORN_DATA_FD as JSON lines. It also speaks the chain extension
(`python eval.py chain STAGE=CASEFILE ...`, see `run_chain` and docs/authoring.md): every stage of a run in this
one process, each stage with its own pipes, its own exit code and a fresh worker.

This process is the supervisor of harness.md §5.3.1: it owns the case file, the seed, the result pipes, input
generation, the reference and checker, and the statistics; it never imports user code. The submission runs in a
worker (harness_worker.py, one per rank) started in a directory holding neither reference.py nor this file, without
POPCORN_* variables and without the result pipes. The supervisor is non-dumpable, so a worker running as the same
user can neither ptrace it nor open its /proc files (memory, environment, file descriptors). Inputs and outputs
travel as plain bytes (never pickle); every input is fresh and the kernel gets its own copy; every timed output is
checked right after its sample. The worker reports each call's time; the supervisor times every request from its
side (wall clock, and the worker's CPU clock as the kernel sees it) and rejects samples whose reported time falls
short of what it measured by more than the overhead calibrated with no-op requests (harness.md §5.3.7), which
defeats patched timers and work left to side threads.

The secret seed leaves the environment (and, by one re-exec, /proc/self/environ) at start-up and is mixed into
every case seed with a keyed one-way function. This CPU harness does not flush the last-level cache and records no
telemetry, so its timings are development-only (harness.md §5.6); on CUDA inputs the worker times with CUDA events
on its stream, closes each sample with a device-wide synchronize and writes 2x the L2 before each call.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import os
import re
import sys
import time

HARNESS_VERSION = "kernelbot-examples 0.4.0"
TIMER, CUDA_TIMER = "cpu-perf-counter", "cuda-event"  # the worker times with CUDA events when the inputs are there
# No user code runs in this process; the worker binds and re-verifies its own timing references.
_perf_counter_ns, _monotonic = time.perf_counter_ns, time.monotonic

EXIT_FAILED, EXIT_NO_FD, EXIT_BAD_INPUT, EXIT_USAGE = 112, 111, 113, 2
STAGES = ("test", "benchmark", "leaderboard", "profile")
# (max samples, sum-of-samples budget in ns, wall-clock limit per case in s); CPU-sized, see module docstring.
LIMITS = {"benchmark": (200, 1_000_000_000, 2.0), "leaderboard": (1000, 2_000_000_000, 3.0)}
MIN_SAMPLES = 10
WARM_UP_CALLS, WARM_UP_NS = 3, 100_000_000
# Warm-up and benchmark-stage inputs start far from the leaderboard stage's iterations 1, 2, ... but public seeds
# (seed + 13 * iteration) stay below 2**32: torch seeds its CPU generator with a seed's low 32 bits only.
WARM_UP_ITERATION_BASE = 1 << 24
BENCHMARK_ITERATION_BASE = 1 << 20
SEED_FD_VARIABLE = "KERNELBOT_HARNESS_SEED_FD"
# The chain extension of the protocol (docs/harness-protocol.md): the runner, seeing this name in the harness's
# text, starts `eval.py chain STAGE=CASEFILE ...` once per run instead of one process per stage.
CHAIN, CHAIN_FD_VARIABLE = "chain", "KERNELBOT_HARNESS_CHAIN_FD"
WORKER_FILE = "harness_worker.py"
HIDDEN_FROM_WORKER = ("reference.py", "harness_refkernels.py")  # besides this file itself
# The supervisor-side cross-check (harness.md §5.3.7): a sample is rejected when the time the supervisor measured
# exceeds the reported one by more than twice the no-op overhead (median of PINGS) plus max(ABS, REL x reported);
# more than MAX_VIOLATING of the calls rejected fails the case. Twice, because on a busy host the overhead of a
# request spreads widely (cold caches after each wake-up); for the same reason this CPU harness tolerates 20% of
# rejected calls where harness.md §5.3.7 says 10%. A patched timer or a side thread hiding its work is rejected on
# nearly every call.
PINGS, CROSS_CHECK_ABS_NS, CROSS_CHECK_REL, MAX_VIOLATING = 7, 100_000, 0.5, 0.2
OVERHEAD_CAP_NS = 2_000_000
MAX_WORKER_STARTS = 3
PAIR = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(\[[-+0-9,\s]*\]|[+-]?[0-9]+|[A-Za-z_][A-Za-z0-9_]*)\s*\Z")


def mix_seed(secret: int | None, seed: int, iteration: int) -> int:
    """The seed of one generated input. Public runs step by 13 as upstream; with a secret, HMAC-SHA256 keyed by the
    secret over (seed, iteration), truncated to 31 bits, so a mixed seed reveals nothing about the secret."""
    if secret is None:
        return seed + 13 * iteration
    digest = hmac.new(str(secret).encode(), f"{seed}:{iteration}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def timed_iteration(stage: str, sample: int) -> int:
    """The input iteration of timed call `sample` (1-based) of a stage; leaderboard keeps upstream's numbering."""
    return BENCHMARK_ITERATION_BASE + sample if stage == "benchmark" else sample


def parse_case_line(line: str) -> dict:
    case = {}
    for part in line.split(";"):
        match = PAIR.match(part)
        if not match:
            raise ValueError(f"bad case line {line!r}")
        key, raw = match.groups()
        if raw.startswith("["):
            case[key] = [int(x) for x in raw[1:-1].split(",") if x.strip()]
        elif raw[0] in "+-0123456789":
            case[key] = int(raw)
        else:
            case[key] = raw
    return case


def summarize(samples: list[int]) -> dict:
    """The statistics of harness.md §5.4 (ns)."""
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


class Channel:
    """The result pipe: one flushed `key: value` line per write; newlines in values are escaped (reports turn a
    literal backslash-n back into a newline)."""

    def __init__(self, fd: int):
        os.set_inheritable(fd, False)  # no worker or other subprocess may inherit it
        self.file = os.fdopen(fd, "w", buffering=1, encoding="utf-8")

    def write(self, key: str, value) -> None:
        text = str(value).replace("\r", "").replace("\n", "\\n")
        self.file.write(f"{key}: {text}\n")
        self.file.flush()


class Harness:
    def __init__(self, secret: int | None, channel: Channel | None, data_fd: int | None, wire, group,
                 world_size: int):
        import torch

        import reference

        self.torch, self.wire = torch, wire
        self.source_dir, self.hidden = worker_files()
        self.generate_input, self.check_implementation = reference.generate_input, reference.check_implementation
        self.reference, self.adapter, self.buffers = reference, load_adapter(), {}
        self.secret = secret
        self.begin_stage(channel, data_fd, group, world_size)

    def begin_stage(self, channel: Channel | None, data_fd: int | None, group, world_size: int) -> None:
        """Everything a stage starts from, as a process of its own would: its pipes, its worker group (forked
        before the seed was read), no failure carried over, the RNG seeded afresh."""
        self.group, self.group_size, self.group_ready, self.failure = group, world_size, False, None
        self.starts = 0 if group is None else 1
        self.timer = TIMER
        self.out, self.data_fd = channel, data_fd
        self.torch.manual_seed(self.secret if self.secret is not None else 42)

    def run_stage(self, stage: str, cases: list[tuple[str, dict]]) -> bool:
        """One stage on this stage's channel, ending with its `check` line; its workers are stopped after it."""
        try:
            if stage == "test":
                passed = self.run_tests(cases)
            elif stage == "profile":
                passed = self.run_profiles(cases)
            else:
                passed = self.run_benchmarks(stage, cases)
        finally:
            self.stop_workers()
        self.out.write("check", "pass" if passed else "fail")
        return passed

    # -- workers --

    def spawn(self, world_size: int) -> None:
        self.starts += 1
        self.group, self.group_size, self.group_ready = self.wire.WorkerGroup(
            self.source_dir, self.hidden, world_size), world_size, False

    def workers(self, world_size: int):
        """The worker group for a case, started (or restarted after a crash) on demand; None with self.failure."""
        if self.group is not None and self.group_size != world_size:
            self.stop_workers()
        if self.failure:  # the submission cannot start: every case fails with the same reason, no restart
            return None
        if self.group is None:
            if self.starts >= MAX_WORKER_STARTS:
                self.failure = f"the worker crashed {self.starts} times"
                return None
            self.spawn(world_size)
        if not self.group_ready:
            try:
                problem = self.group.start(1 << 20)
            except self.wire.WorkerDied as exc:
                problem = str(exc)
            if problem:
                self.stop_workers()
                self.failure = problem
                return None
            self.group_ready = True
        return self.group

    def stop_workers(self) -> None:
        if self.group is not None:
            self.group.stop()
            self.group = None

    # -- one request --

    def generate(self, case: dict, iteration: int, rank: int | None):
        if "seed" in case:
            case = {**case, "seed": mix_seed(self.secret, case["seed"], iteration)}
        return self.generate_input(**case) if rank is None else self.generate_input(**case, rank=rank)

    def verify(self, pristine, output) -> tuple[bool, str]:
        verdict = self.check_implementation(pristine, output)
        if isinstance(verdict, (tuple, bool)):
            return (bool(verdict[0]), str(verdict[1])) if isinstance(verdict, tuple) else (verdict, "")
        return not verdict, str(verdict)  # legacy: a message string, empty means pass

    def request(self, kind: str, case: dict, iteration: int) -> tuple[bool, str, dict]:
        """Fresh inputs (one per rank), one worker request, every output checked against the pristine inputs.
        Returns (ok, message, measurement) with the reported ns, the supervisor's wall and worker-CPU ns."""
        world_size = int(case.get("world_size", 1))
        group = self.workers(world_size)
        if group is None:
            return False, self.failure, {}
        ranks = [None] if world_size == 1 else list(range(world_size))
        pristine = [self.generate(case, iteration, rank) for rank in ranks]
        self.timer = CUDA_TIMER if on_cuda(self.torch, pristine[0]) else TIMER
        frames = [self.wire.pack(self.torch, value, exact=False) for value in pristine]
        outputs = self.output_buffers(case, pristine[0])
        if outputs:
            frames = [({**header, "outputs": outputs}, body) for header, body in frames]
        limit = 64 * max(len(body) for _, body in frames) + (64 << 20)
        try:
            replies, wall, cpu = group.exchange(kind, frames, limit)
        except self.wire.WorkerDied as exc:
            self.stop_workers()
            return False, str(exc), {}
        for rank, ((header, body), original) in enumerate(zip(replies, pristine)):
            prefix = f"rank {rank} - " if world_size > 1 else ""
            if header.get("error"):
                return False, prefix + str(header["error"]), {}
            if kind == "ping":
                continue
            try:
                output = self.wire.unpack(self.torch, header, body)
            except (ValueError, TypeError, IndexError, KeyError, RuntimeError) as exc:
                self.stop_workers()
                return False, f"{prefix}worker protocol violation: {exc}", {}
            ok, message = self.verify(original, output)
            if not ok:
                return False, prefix + (message or "check failed"), {}
        reported = replies[0][0].get("ns")
        if not isinstance(reported, int) or reported < 0:
            return False, "the worker reported no time", {}
        return True, "", {"ns": reported, "wall": wall, "cpu": cpu, "report": replies[0][0].get("report", "")}

    def output_buffers(self, case: dict, pristine) -> list:
        """Input tensors the kernel may return (a preallocated output, found by the reference-kernels adapter)."""
        if self.adapter is None:
            return []
        key = repr(sorted(case.items()))
        if key not in self.buffers:
            self.buffers[key] = self.adapter.output_buffers(self.torch, self.reference, pristine)
        return self.buffers[key]

    # -- stages --

    def run_tests(self, cases: list[tuple[str, dict]]) -> bool:
        self.out.write("test-count", len(cases))
        all_passed = True
        for i, (spec, case) in enumerate(cases):
            self.out.write(f"test.{i}.spec", spec)
            ok, message, _ = self.request("call", case, 0)
            self.out.write(f"test.{i}.status", "pass" if ok else "fail")
            if not ok or message:
                self.out.write(f"test.{i}.{'message' if ok else 'error'}", message or "check failed")
            all_passed &= ok
        return all_passed

    def run_profiles(self, cases: list[tuple[str, dict]]) -> bool:
        self.out.write("profiler", "torch.profiler")
        self.out.write("benchmark-count", len(cases))
        all_passed = True
        for i, (spec, case) in enumerate(cases):
            self.out.write(f"benchmark.{i}.spec", spec)
            ok, message, measured = self.request("profile", case, 0)
            if ok:
                report = base64.b64encode(str(measured["report"]).encode()).decode().replace("/", "*")
                self.out.write(f"benchmark.{i}.report", report)
            else:
                self.out.write(f"benchmark.{i}.error", message or "check failed")
            self.out.write(f"benchmark.{i}.status", "pass" if ok else "fail")
            all_passed &= ok
        return all_passed

    def run_benchmarks(self, stage: str, cases: list[tuple[str, dict]]) -> bool:
        self.out.write("benchmark-count", len(cases))
        if cases:
            self.warm_up(cases[0][1])
        all_passed = True
        for i, (spec, case) in enumerate(cases):
            self.out.write(f"benchmark.{i}.spec", spec)
            samples, error, discarded = self.measure(stage, case)
            if error and discarded:
                # A burst of host load (a service restarting beside the runner) inflates the supervisor's window
                # for a while; hidden work shows on every call. So a case failed by the cross-check is measured
                # once more from scratch, and only a second failure stands.
                samples, error, discarded = self.measure(stage, case)
            if error:
                self.out.write(f"benchmark.{i}.status", "fail")
                self.out.write(f"benchmark.{i}.error", error)
                all_passed = False
                if stage == "leaderboard":  # upstream stops the ranked stage at the first failing case
                    break
                continue
            for key, value in summarize(samples).items():
                self.out.write(f"benchmark.{i}.{key}", value)
            self.out.write(f"benchmark.{i}.timer", self.timer)
            self.out.write(f"benchmark.{i}.discarded", discarded)
            self.out.write(f"benchmark.{i}.status", "pass")
            self.send_data({"key": f"benchmark.{i}", "samples_ns": samples, "timer": self.timer})
        return all_passed

    def warm_up(self, case: dict) -> None:
        started, calls = _perf_counter_ns(), 0
        while calls < WARM_UP_CALLS or _perf_counter_ns() - started < WARM_UP_NS:
            self.request("call", case, WARM_UP_ITERATION_BASE + calls)
            calls += 1

    def calibrate(self, case: dict) -> int:
        """The no-op overhead of one request for this case: the median over pings (inputs never used again),
        capped so that a worker slowing its pings down cannot buy itself room."""
        overheads = []
        for ping in range(PINGS):
            ok, _, measured = self.request("ping", case, WARM_UP_ITERATION_BASE - 1 - ping)
            if ok:
                overheads.append(self.window(measured))
        return min(sorted(overheads)[len(overheads) // 2] if overheads else OVERHEAD_CAP_NS, OVERHEAD_CAP_NS)

    @staticmethod
    def window(measured: dict) -> int:
        """What the supervisor saw a request take: wall time, or less where the worker's CPU clock says so (the
        wall clock also counts the worker waiting for a core on a busy host)."""
        cpu = measured["cpu"]
        return measured["wall"] if cpu is None else min(measured["wall"], cpu)

    def measure(self, stage: str, case: dict) -> tuple[list[int], str, int]:
        max_samples, sample_budget, wall_limit = LIMITS[stage]
        ok, message, _ = self.request("call", case, 0)  # one untimed correctness check first
        if not ok:
            return [], message or "check failed", 0
        overhead = self.calibrate(case)
        samples: list[int] = []
        started, violating = _monotonic(), 0
        total = total_squares = 0
        for sample in range(1, 2 * max_samples + 1):
            # A fresh input every call, checked right after.
            ok, message, measured = self.request("call", case, timed_iteration(stage, sample))
            if not ok:
                return [], f"timed call {sample}: {message or 'check failed'}", violating
            elapsed = measured["ns"]
            if self.window(measured) - elapsed > 2 * overhead + max(CROSS_CHECK_ABS_NS, CROSS_CHECK_REL * elapsed):
                violating += 1
                if violating >= MIN_SAMPLES and violating > sample // 2:  # early out: hiding work shows at once
                    return [], (f"unsynchronized work or timer tampering detected: {violating} of {sample} calls "
                                f"took longer than the worker reported"), violating
                continue
            samples.append(elapsed)
            total, total_squares = total + elapsed, total_squares + elapsed * elapsed
            if len(samples) >= max_samples or (len(samples) >= MIN_SAMPLES and (
                    total > sample_budget or _monotonic() - started > wall_limit
                    or self.converged(samples, total, total_squares))):
                break
        if violating > MAX_VIOLATING * (len(samples) + violating):
            return [], f"unsynchronized work or timer tampering detected: {violating} calls took longer than reported", violating
        return samples, "", violating

    @staticmethod
    def converged(samples: list[int], total: int, total_squares: int) -> bool:
        n = len(samples)
        mean = total / n
        variance = max(total_squares - n * mean * mean, 0.0) / (n - 1)
        if mean <= 0 or math.sqrt(variance / n) / mean >= 0.001:
            return False
        stats = summarize(samples)  # only sorted once the cheap criterion holds
        return (stats["ci_high"] - stats["ci_low"]) / 2 < 0.005 * stats["median"]

    def send_data(self, record: dict) -> None:
        try:
            if self.data_fd is not None:
                os.write(self.data_fd, (json.dumps(record) + "\n").encode())
        except OSError:
            self.data_fd = None  # supplementary channel only; never fail a stage over it


def _pop_fd(name: str) -> int | None:
    try:
        fd = int(os.environ.pop(name))
        os.fstat(fd)
        return fd
    except (KeyError, ValueError, OSError):
        return None


def hide_seed_by_reexec() -> None:
    """Unsetting a variable leaves it in /proc/self/environ: re-exec once with the seed moved into a pipe that is
    drained before any worker starts."""
    raw = os.environ.pop("POPCORN_SEED", None)
    if raw is not None:
        read_end, write_end = os.pipe()
        os.write(write_end, raw.encode())
        os.close(write_end)
        os.set_inheritable(read_end, True)
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, SEED_FD_VARIABLE: str(read_end)})


def worker_files() -> tuple[str, tuple[str, ...]]:
    """The directory whose files the worker gets, and the names it must not get (this file, the reference)."""
    return os.path.dirname(os.path.abspath(sys.argv[0])), (os.path.basename(sys.argv[0]), *HIDDEN_FROM_WORKER)


def on_cuda(torch, value) -> bool:
    """Whether an input holds a CUDA tensor (then the worker times it with CUDA events)."""
    if isinstance(value, torch.Tensor):
        return value.is_cuda
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return any(on_cuda(torch, item) for item in items)


def load_adapter():
    """The reference-kernels adapter, when the runner shipped it (runner/harness_choice.py)."""
    try:
        import harness_refkernels
    except ImportError:
        return None
    return harness_refkernels


def make_undumpable() -> None:
    """No ptrace and no /proc/<pid>/{mem,environ,fd} for processes of the same user, the workers included."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def read_cases(path: str) -> list[tuple[str, dict]]:
    with open(path, encoding="utf-8") as handle:
        return [(line.strip(), parse_case_line(line)) for line in handle if line.strip()]


def import_torch_and_wire():
    import warnings

    # CPU torch wheels warn on every import when numpy is absent; that noise would fill every report's stderr.
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import harness_worker as wire
    import torch

    torch.set_num_threads(1)  # side-by-side runs on few cores: spinning OpenMP pools made timings 10-30x noisier
    return torch, wire


def read_secret() -> int | None:
    """The seed from its pipe (drained and closed: the secret now lives only in this process); ValueError if bad."""
    raw_seed, seed_fd = "", _pop_fd(SEED_FD_VARIABLE)
    if seed_fd is not None:
        with os.fdopen(seed_fd, "rb") as pipe:
            raw_seed = pipe.read().decode()
    return int(raw_seed) if raw_seed else None


def first_world_size(cases: list[tuple[str, dict]]) -> int:
    return int(cases[0][1].get("world_size", 1)) if cases else 1


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[1] == CHAIN:
        return run_chain(argv)
    if len(argv) < 3 or argv[1] not in STAGES:
        print(f"usage: {argv[0]} <{'|'.join(STAGES)}> <casefile>", file=sys.stderr)
        return EXIT_USAGE
    hide_seed_by_reexec()
    make_undumpable()
    result_fd = _pop_fd("POPCORN_FD")
    if result_fd is None:
        print("POPCORN_FD is missing or not an open file descriptor", file=sys.stderr)
        return EXIT_NO_FD
    data_fd = _pop_fd("POPCORN_DATA_FD")
    if data_fd is not None:  # like the result pipe: never inherited by a worker
        os.set_inheritable(data_fd, False)
    try:
        cases = read_cases(argv[2])
    except (OSError, ValueError) as exc:
        print(f"cannot read the cases: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    # The first worker is forked now, with torch imported but before the seed is read or reference.py imported,
    # so it starts fast and holds nothing secret. Later workers (other world sizes, restarts) are fresh processes.
    _, wire = import_torch_and_wire()
    group = wire.WorkerGroup(*worker_files(), first_world_size(cases), fork=True)
    try:
        secret = read_secret()
    except ValueError:
        group.stop()
        print("cannot read the seed", file=sys.stderr)
        return EXIT_BAD_INPUT
    channel = Channel(result_fd)
    channel.write("harness-version", HARNESS_VERSION)
    harness = Harness(secret, channel, data_fd, wire, group, first_world_size(cases))
    passed = harness.run_stage(argv[1], cases)
    channel.file.close()
    return 0 if passed else EXIT_FAILED


# ---- the chain: all stages of one run in this one supervisor (docs/harness-protocol.md) ---------------------------


def run_chain(argv: list[str]) -> int:
    """`eval.py chain STAGE=CASEFILE ...` with KERNELBOT_HARNESS_CHAIN_FD naming a unix socket to the runner. Per
    stage the runner sends `{"stage": STAGE}` with that stage's result and data pipes attached; the harness runs
    the stage as `eval.py STAGE CASEFILE` would, closes both pipes, and answers `{"stage": STAGE, "exit": CODE}`
    with the exit code that process would have had. The runner closing the socket ends the chain.

    One worker group per stage is forked now, before the seed is read or reference.py imported, and imports the
    submission only when its stage begins: every stage gets a fresh worker, as a process of its own would, while
    torch, the reference and this process are started once per run."""
    plan = [item.partition("=") for item in argv[2:]]
    hide_seed_by_reexec()
    make_undumpable()
    control_fd = _pop_fd(CHAIN_FD_VARIABLE)
    if control_fd is None or not plan or any(stage not in STAGES or not path for stage, _, path in plan):
        print(f"usage: {CHAIN_FD_VARIABLE}=<socket fd> {argv[0]} {CHAIN} <stage>=<casefile>...", file=sys.stderr)
        return EXIT_USAGE if control_fd is not None else EXIT_NO_FD
    import socket

    control = socket.socket(fileno=control_fd)
    control.set_inheritable(False)
    stages = []
    for stage, _, path in plan:
        try:
            stages.append((stage, read_cases(path), ""))
        except (OSError, ValueError) as exc:
            stages.append((stage, [], f"cannot read the cases: {exc}"))
    _, wire = import_torch_and_wire()
    groups = [wire.WorkerGroup(*worker_files(), first_world_size(cases), fork=True, deferred=True)
              for _, cases, problem in stages]
    try:
        secret, bad_seed = read_secret(), False
    except ValueError:
        secret, bad_seed = None, True
    harness = Harness(secret, None, None, wire, None, 1) if not bad_seed else None
    try:
        for (stage, cases, problem), group in zip(stages, groups):
            try:
                message, fds, _, _ = socket.recv_fds(control, 4096, 2)
            except OSError:
                break
            if not message:
                break  # the runner ended the chain
            code = chain_stage(harness, stage, cases, problem or ("cannot read the seed" if bad_seed else ""),
                               group, message, fds)
            sys.stdout.flush()
            sys.stderr.flush()
            control.send(json.dumps({"stage": stage, "exit": code}).encode())
    finally:
        for group in groups:
            group.stop()
    return 0


def chain_stage(harness, stage: str, cases: list, problem: str, group, message: bytes, fds: list[int]) -> int:
    """One stage of the chain on the pipes the runner sent with `message`; the exit code of a lone process."""
    for fd in fds:
        os.set_inheritable(fd, False)
    result_fd, data_fd = (fds + [None, None])[:2]
    try:
        if result_fd is None or json.loads(message).get("stage") != stage:
            print("the runner sent no result pipe for this stage", file=sys.stderr)
            return EXIT_NO_FD
        if problem:
            print(problem, file=sys.stderr)
            return EXIT_BAD_INPUT
        channel = Channel(result_fd)
        result_fd = None  # the channel owns it now
        channel.write("harness-version", HARNESS_VERSION)
        harness.begin_stage(channel, data_fd, group, first_world_size(cases))
        try:
            passed = harness.run_stage(stage, cases)
        except Exception:  # noqa: BLE001 - what a lone process would print before dying with exit code 1
            import traceback

            traceback.print_exc()
            return 1
        finally:
            channel.file.close()
        return 0 if passed else EXIT_FAILED
    finally:
        for fd in (result_fd, data_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass


if __name__ == "__main__":
    sys.exit(main(sys.argv))
