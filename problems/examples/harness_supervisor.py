"""The supervisor of the example harness (eval.py, docs/authoring.md, "The harness protocol"): the result pipe, the workers of a stage,
one request (fresh inputs, one worker call, every output checked against the pristine inputs) and the stages
built from requests. The timing method is harness_measure.py; the process around it (argv, pipes, seed, chain) is
eval.py.

Shipped beside eval.py wherever it goes (the task.yml `files` of each bundled problem, runner/task/harness_choice.py for
reference-kernels problems) and hidden from the worker, like eval.py and reference.py.
"""

from __future__ import annotations

import base64
import json
import os
import sys

from harness_batch import CONTRACT_FILE, batch_buffers, checked_positions, load_rule
from harness_measure import measure, mix_seed, summarize, warm_up
from harness_wire import honest_trip_ns, pack, unpack

TIMER, CUDA_TIMER = "cpu-perf-counter", "cuda-event"  # the worker times with CUDA events when the inputs are there
MAX_WORKER_STARTS = 3
# The supervisor's files, which the worker never gets (besides the main script itself: eval.py).
HIDDEN_FROM_WORKER = ("reference.py", "harness_refkernels.py", "harness_supervisor.py", "harness_measure.py",
                      "harness_group.py", "harness_batch.py", CONTRACT_FILE)
TIMED_STAGES = ("benchmark", "leaderboard")


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
    """One run's supervisor: the reference and checker, the secret, and per stage its pipes and worker group."""

    def __init__(self, secret: int | None, channel: Channel | None, data_fd: int | None, wire, group,
                 world_size: int):
        import torch

        # Late: eval.py forks the first worker before it builds the Harness, and that worker must not hold
        # reference.py in its memory (docs/authoring.md, rule 3).
        import reference

        self.torch, self.wire = torch, wire
        self.source_dir, self.hidden = worker_files()
        self.generate_input, self.check_implementation = reference.generate_input, reference.check_implementation
        self.reference, self.adapter, self.buffers = reference, load_adapter(), {}
        # The replaced stock version's batch rule, when it timed batches (harness_batch.py); None: one input a call.
        self.batch_rule, self.batch_counts, self.batching = load_rule(self.source_dir), {}, False
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
        self.batching = self.batch_rule is not None and stage in TIMED_STAGES
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

    def generate(self, case: dict, iteration: int, rank: int | None, item: int = 0):
        if "seed" in case:
            case = {**case, "seed": mix_seed(self.secret, case["seed"], iteration, item)}
        return self.generate_input(**case) if rank is None else self.generate_input(**case, rank=rank)

    def verify(self, pristine, output) -> tuple[bool, str]:
        verdict = self.check_implementation(pristine, output)
        if isinstance(verdict, (tuple, bool)):
            return (bool(verdict[0]), str(verdict[1])) if isinstance(verdict, tuple) else (verdict, "")
        return not verdict, str(verdict)  # legacy: a message string, empty means pass

    def request(self, kind: str, case: dict, iteration: int, timed: bool = False) -> tuple[bool, str, dict]:
        """Fresh inputs (one per rank, or one batch of them where the stage times batches), one worker request,
        every output (of a timed batch: a sample of them) checked against the pristine inputs. Returns (ok, message,
        measurement) with the reported ns, the supervisor's wall and worker-CPU ns, and the number of inputs."""
        world_size = int(case.get("world_size", 1))
        group = self.workers(world_size)
        if group is None:
            return False, self.failure, {}
        ranks = [None] if world_size == 1 else list(range(world_size))
        pristine = [self.generate(case, iteration, rank) for rank in ranks]
        self.timer = CUDA_TIMER if on_cuda(self.torch, pristine[0]) else TIMER
        outputs = self.output_buffers(case, pristine[0])
        count = self.batch_count(kind, case, pristine[0]) if world_size == 1 else 1
        extra = {"outputs": outputs} if outputs else {}
        if count > 1:
            pristine = [[pristine[0], *(self.generate(case, iteration, None, item) for item in range(1, count))]]
            extra = {"batch": True, "outputs": batch_buffers(outputs, count)}
        frames = [pack(self.torch, value, exact=False) for value in pristine]
        frames = [({**header, **extra}, body) for header, body in frames]
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
            if kind in ("ping", "echo"):
                continue
            try:
                output = unpack(self.torch, header, body)
            except (ValueError, TypeError, IndexError, KeyError, RuntimeError) as exc:
                self.stop_workers()
                return False, f"{prefix}worker protocol violation: {exc}", {}
            ok, message = self.verify(original, output) if count == 1 else self.verify_batch(original, output, timed)
            if not ok:
                return False, prefix + (message or "check failed"), {}
        reported = replies[0][0].get("ns")
        if not isinstance(reported, int) or reported < 0:
            return False, "the worker reported no time", {}
        # a ping's bound, measured here where the worker cannot slow it (harness_measure.Overhead)
        honest = honest_trip_ns(self.torch, frames, limit) if kind == "ping" else None
        return True, "", {"ns": reported, "wall": wall, "cpu": cpu, "report": replies[0][0].get("report", ""),
                          "inputs": count, "flushed": True,  # the worker flushes caches before a call (rule 7)
                          "honest_trip": honest}

    def batch_count(self, kind: str, case: dict, first) -> int:
        """Inputs per request: 1, or the batch rule's count for this case in a timed stage (pings carry the same
        batch as calls, so the calibrated overhead includes moving it)."""
        if not self.batching or kind not in ("call", "ping", "echo"):
            return 1
        key = repr(sorted(case.items()))
        if key not in self.batch_counts:
            self.batch_counts[key] = self.batch_rule.count(self.torch, first)
        return self.batch_counts[key]

    def verify_batch(self, pristine: list, outputs, timed: bool) -> tuple[bool, str]:
        """One output per input; the whole batch checked when untimed, a sample drawn now when timed."""
        if not isinstance(outputs, list) or len(outputs) != len(pristine):
            return False, f"a batch of {len(pristine)} inputs needs a list of {len(pristine)} outputs"
        for position in checked_positions(len(pristine), whole=not timed):
            ok, message = self.verify(pristine[position], outputs[position])
            if not ok:
                return False, f"input {position + 1} of the batch of {len(pristine)}: {message or 'check failed'}"
        return True, ""

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
            warm_up(self.request, cases[0][1])
        all_passed = True
        for i, (spec, case) in enumerate(cases):
            self.out.write(f"benchmark.{i}.spec", spec)
            samples, error, discarded = measure(self.request, stage, case)
            if error and discarded:
                # A burst of host load (a service restarting beside the runner) inflates the supervisor's window
                # for a while; hidden work shows on every call. So a case failed by the cross-check is measured
                # once more from scratch, on inputs of its own, and only a second failure stands.
                samples, error, discarded = measure(self.request, stage, case, attempt=1)
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

    def send_data(self, record: dict) -> None:
        try:
            if self.data_fd is not None:
                os.write(self.data_fd, (json.dumps(record) + "\n").encode())
        except OSError:
            self.data_fd = None  # supplementary channel only; never fail a stage over it


def worker_files() -> tuple[str, tuple[str, ...]]:
    """The directory whose files the worker gets, and the names it must not get (the main script, the supervisor's
    other files, the reference)."""
    return os.path.dirname(os.path.abspath(sys.argv[0])), (os.path.basename(sys.argv[0]), *HIDDEN_FROM_WORKER)


def on_cuda(torch, value) -> bool:
    """Whether an input holds a CUDA tensor (then the worker times it with CUDA events)."""
    if isinstance(value, torch.Tensor):
        return value.is_cuda
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return any(on_cuda(torch, item) for item in items)


def load_adapter():
    """The reference-kernels adapter, when the runner shipped it (runner/task/harness_choice.py)."""
    try:
        import harness_refkernels
    except ImportError:
        return None
    return harness_refkernels
