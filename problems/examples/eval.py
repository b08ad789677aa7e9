"""KernelBot example harness for Python problems: `python eval.py <test|benchmark|leaderboard> <casefile>`.

Speaks the POPCORN_FD protocol of harness.md §4: `key: value` lines on the result pipe, a single `check: pass|fail`
at the end, exit 0 (all passed), 112 (a case failed), 111 (no usable POPCORN_FD), 113 (bad case file or seed),
2 (usage). Bulk samples go to the optional POPCORN_DATA_FD as JSON lines.

What it does right (harness.md §5.3): the secret seed leaves the environment (and, by one re-exec,
/proc/self/environ) before the submission is imported and is mixed into every case seed with a keyed one-way
function; the kernel gets a clone of a fresh input and is checked against the pristine original; every timed call
gets a fresh input (benchmark and leaderboard stages use disjoint seed streams, so no stage can replay another) and
is checked right after its sample; timing functions are bound before the import and re-verified after every call
(a replaced `time.*` function fails the case); adaptive stopping with median + 95% CI.

Known limitations, to be lifted by the supervisor/worker split (a later issue): the submission runs in this
process, so it shares the timer, the checker and the result fd with the harness (the runner's tamper and
consistency rules are the best-effort defence meanwhile); this CPU harness does not flush the last-level cache,
runs torch on one thread and records no telemetry, so its timings are development-only (harness.md §5.6).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import re
import sys
import time

HARNESS_VERSION = "kernelbot-examples 0.2.0"
TIMER = "cpu-perf-counter"
# Bound before any user code is imported, and re-verified after every call (timers_intact).
_TIME_FUNCTIONS = {name: getattr(time, name) for name in (
    "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns", "process_time",
    "process_time_ns", "thread_time", "thread_time_ns")}
_perf_counter_ns, _monotonic = _TIME_FUNCTIONS["perf_counter_ns"], _TIME_FUNCTIONS["monotonic"]

EXIT_FAILED, EXIT_NO_FD, EXIT_BAD_INPUT, EXIT_USAGE = 112, 111, 113, 2
STAGES = ("test", "benchmark", "leaderboard")
# (max samples, sum-of-samples budget in ns, wall-clock limit per case in s); CPU-sized, see module docstring.
LIMITS = {"benchmark": (200, 1_000_000_000, 10.0), "leaderboard": (1000, 2_000_000_000, 20.0)}
MIN_SAMPLES = 10
WARM_UP_CALLS, WARM_UP_NS = 3, 100_000_000
# Warm-up and benchmark-stage inputs start far from the leaderboard stage's iterations 1, 2, ... but public seeds
# (seed + 13 * iteration) stay below 2**32: torch seeds its CPU generator with a seed's low 32 bits only.
WARM_UP_ITERATION_BASE = 1 << 24
BENCHMARK_ITERATION_BASE = 1 << 20
SEED_FD_VARIABLE = "KERNELBOT_HARNESS_SEED_FD"
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


def timers_intact() -> str:
    """Empty when every timing function is still the one bound at start-up, else the tampering error."""
    replaced = [name for name, bound in _TIME_FUNCTIONS.items() if getattr(time, name, None) is not bound]
    replaced += ["the time module"] if sys.modules.get("time") is not time else []
    return f"timer tampering detected: {', '.join(replaced)} replaced" if replaced else ""


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
        os.set_inheritable(fd, False)  # subprocesses started by user code must not inherit it
        self.file = os.fdopen(fd, "w", buffering=1, encoding="utf-8")

    def write(self, key: str, value) -> None:
        text = str(value).replace("\r", "").replace("\n", "\\n")
        self.file.write(f"{key}: {text}\n")
        self.file.flush()


class Harness:
    def __init__(self, secret: int | None, channel: Channel, data_fd: int | None):
        import warnings

        # CPU torch wheels warn on every import when numpy is absent; that noise would fill every report's stderr.
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch

        import reference

        self.torch = torch
        # Bound now: replacing the module attributes later does not reach the harness.
        self.generate_input, self.check_implementation = reference.generate_input, reference.check_implementation
        self.secret = secret
        self.out = channel
        self.data_fd = data_fd
        torch.manual_seed(secret if secret is not None else 42)
        # One intra-op thread: the public and secret runs of a submission execute side by side, and spinning
        # OpenMP pools oversubscribing the cores made CPU timings 10-30x slower and far noisier.
        torch.set_num_threads(1)
        from submission import custom_kernel  # only now: the seed is gone from the environment

        self.kernel = custom_kernel

    def clone(self, value):
        if isinstance(value, (list, tuple)):
            return type(value)(self.clone(item) for item in value)
        if isinstance(value, dict):
            return {key: self.clone(item) for key, item in value.items()}
        return value.clone() if isinstance(value, self.torch.Tensor) else value

    def storages(self, value) -> set[int]:
        if isinstance(value, self.torch.Tensor):
            pointer = value.untyped_storage().data_ptr()
            return {pointer} if pointer else set()
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
        return set().union(*(self.storages(item) for item in items))

    def generate(self, case: dict, iteration: int):
        if "seed" in case:
            case = {**case, "seed": mix_seed(self.secret, case["seed"], iteration)}
        return self.generate_input(**case)

    def verify(self, pristine, given, output) -> tuple[bool, str]:
        if self.storages(output) & self.storages(given):
            return False, "output shares storage with an input"
        verdict = self.check_implementation(pristine, output)
        if isinstance(verdict, (tuple, bool)):
            return (bool(verdict[0]), str(verdict[1])) if isinstance(verdict, tuple) else (verdict, "")
        return not verdict, str(verdict)  # legacy: a message string, empty means pass

    def call(self, case: dict, iteration: int) -> tuple[bool, str, int]:
        """Generate, run the kernel on a clone, check against the untouched original. Returns (ok, message, ns)."""
        pristine = self.generate(case, iteration)
        given = self.clone(pristine)
        try:
            start = _perf_counter_ns()
            output = self.kernel(given)
            elapsed = _perf_counter_ns() - start
            tampering = timers_intact()
            ok, message = (False, tampering) if tampering else self.verify(pristine, given, output)
        except Exception as exc:  # the kernel's failure is this case's failure, not a harness crash
            return False, f"{type(exc).__name__}: {exc}", 0
        return ok, message, elapsed

    def run_tests(self, cases: list[tuple[str, dict]]) -> bool:
        self.out.write("test-count", len(cases))
        all_passed = True
        for i, (spec, case) in enumerate(cases):
            self.out.write(f"test.{i}.spec", spec)
            ok, message, _ = self.call(case, 0)
            self.out.write(f"test.{i}.status", "pass" if ok else "fail")
            if not ok or message:
                self.out.write(f"test.{i}.{'message' if ok else 'error'}", message or "check failed")
            all_passed &= ok
        return all_passed

    def run_benchmarks(self, stage: str, cases: list[tuple[str, dict]]) -> bool:
        self.out.write("benchmark-count", len(cases))
        if cases:
            self.warm_up(cases[0][1])
        all_passed = True
        for i, (spec, case) in enumerate(cases):
            self.out.write(f"benchmark.{i}.spec", spec)
            samples, error = self.measure(stage, case)
            if error:
                self.out.write(f"benchmark.{i}.status", "fail")
                self.out.write(f"benchmark.{i}.error", error)
                all_passed = False
                if stage == "leaderboard":  # upstream stops the ranked stage at the first failing case
                    break
                continue
            for key, value in summarize(samples).items():
                self.out.write(f"benchmark.{i}.{key}", value)
            self.out.write(f"benchmark.{i}.timer", TIMER)
            self.out.write(f"benchmark.{i}.status", "pass")
            self.send_data({"key": f"benchmark.{i}", "samples_ns": samples, "timer": TIMER})
        return all_passed

    def warm_up(self, case: dict) -> None:
        started, calls = _perf_counter_ns(), 0
        while calls < WARM_UP_CALLS or _perf_counter_ns() - started < WARM_UP_NS:
            self.call(case, WARM_UP_ITERATION_BASE + calls)
            calls += 1

    def measure(self, stage: str, case: dict) -> tuple[list[int], str]:
        max_samples, sample_budget, wall_limit = LIMITS[stage]
        ok, message, _ = self.call(case, 0)  # one untimed correctness check first
        if not ok:
            return [], message or "check failed"
        samples: list[int] = []
        started = _monotonic()
        total = total_squares = 0
        for sample in range(1, max_samples + 1):
            # A fresh input every call, checked right after.
            ok, message, elapsed = self.call(case, timed_iteration(stage, sample))
            if not ok:
                return [], f"timed call {sample}: {message or 'check failed'}"
            samples.append(elapsed)
            total, total_squares = total + elapsed, total_squares + elapsed * elapsed
            if len(samples) >= MIN_SAMPLES and (total > sample_budget or _monotonic() - started > wall_limit
                                                or self.converged(samples, total, total_squares)):
                break
        return samples, ""

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
    """Unsetting a variable leaves it in /proc/self/environ, which user code can read: re-exec once with the seed
    moved into a pipe that is drained before the submission is imported."""
    raw = os.environ.pop("POPCORN_SEED", None)
    if raw is not None:
        read_end, write_end = os.pipe()
        os.write(write_end, raw.encode())
        os.close(write_end)
        os.set_inheritable(read_end, True)
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, SEED_FD_VARIABLE: str(read_end)})


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] not in STAGES:
        print(f"usage: {argv[0]} <{'|'.join(STAGES)}> <casefile>", file=sys.stderr)
        return EXIT_USAGE
    hide_seed_by_reexec()
    result_fd = _pop_fd("POPCORN_FD")
    if result_fd is None:
        print("POPCORN_FD is missing or not an open file descriptor", file=sys.stderr)
        return EXIT_NO_FD
    data_fd = _pop_fd("POPCORN_DATA_FD")
    if data_fd is not None:  # like the result pipe: never inherited by processes the submission starts
        os.set_inheritable(data_fd, False)
    raw_seed, seed_fd = "", _pop_fd(SEED_FD_VARIABLE)
    if seed_fd is not None:
        with os.fdopen(seed_fd, "rb") as pipe:  # drained and closed: the secret now lives only in this process
            raw_seed = pipe.read().decode()
    try:
        secret = int(raw_seed) if raw_seed else None
        with open(argv[2], encoding="utf-8") as handle:
            cases = [(line.strip(), parse_case_line(line)) for line in handle if line.strip()]
    except (OSError, ValueError) as exc:
        print(f"cannot read the cases: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    channel = Channel(result_fd)
    channel.write("harness-version", HARNESS_VERSION)
    harness = Harness(secret, channel, data_fd)
    stage = argv[1]
    passed = harness.run_tests(cases) if stage == "test" else harness.run_benchmarks(stage, cases)
    channel.write("check", "pass" if passed else "fail")
    channel.file.close()
    return 0 if passed else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv))
