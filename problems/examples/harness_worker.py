"""The worker half of the example harness (docs/authoring.md, "The harness protocol"): the only process that imports and runs user code.

The supervisor (eval.py) starts it as `python harness_worker.py <request fd> <reply fd>` in a directory holding
only the submission and the modules it may import (never reference.py or eval.py), with no POPCORN_* variables
and no inherited result pipe. It answers requests in frames (see `write_frame`): `call` (run the kernel once on
the given input and report its time), `ping` (the same round trip with no kernel, echoing the input: the
supervisor's calibration), `echo` (a ping without the cache flush before it), `profile` (one call under
torch.profiler) and `exit`. A `call`, `ping` or `echo` marked `batch`
carries a list of inputs: the kernel runs once per input inside one timing window (docs/authoring.md, "Batched
timing").

Nothing here is trusted by the supervisor: user code can patch this module at will. Its checks exist to give
honest submissions precise messages; the supervisor re-checks outputs and times every request from its side.
Frames and values travel as harness_wire.py encodes them (never pickle). The supervisor's side of the pipes (starting,
forking, stopping workers) is harness_group.py.
"""

from __future__ import annotations

import gc
import os
import sys
import time

from harness_wire import pack, read_frame, unpack, write_frame

# Calls before the captured one under an external profiler (see Worker.profile_under_tool).
PROFILE_WARM_UP_CALLS = 3
# Bound before the submission is imported.
_TIME_FUNCTIONS = {name: getattr(time, name) for name in ("perf_counter", "perf_counter_ns", "monotonic",
                                                          "monotonic_ns", "time", "time_ns", "process_time_ns")}
_perf_counter_ns = _TIME_FUNCTIONS["perf_counter_ns"]

# mallopt's parameters (malloc.h) and the mmap threshold glibc's own adjustment stops at on 64-bit hosts.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, STEADY_MMAP_THRESHOLD = -1, -3, 32 << 20
# The least the worker writes to flush a core's caches before a call on a CPU (see cpu_flush_bytes), for hosts whose
# sysfs lists no L2 or a small one.
CPU_FLUSH_MIN_BYTES = 8 << 20

_EVENT_METHODS = ("record", "elapsed_time", "synchronize", "query", "wait")
_bound_events: dict = {}


def bind_event_timer(torch) -> None:
    """Remember torch.cuda.Event and its timing methods before the submission is imported."""
    _bound_events["Event"] = torch.cuda.Event
    _bound_events.update({name: getattr(torch.cuda.Event, name, None) for name in _EVENT_METHODS})


def timers_intact(torch=None) -> str:
    replaced = [name for name, bound in _TIME_FUNCTIONS.items() if getattr(time, name, None) is not bound]
    if torch is not None and _bound_events:
        event = torch.cuda.Event
        replaced += ["torch.cuda.Event"] if event is not _bound_events["Event"] else []
        replaced += [f"torch.cuda.Event.{name}" for name in _EVENT_METHODS
                     if getattr(event, name, None) is not _bound_events[name]]
    return f"timer tampering detected: {', '.join(replaced)} replaced" if replaced else ""


def storages(torch, value) -> set[int]:
    if isinstance(value, torch.Tensor):
        pointer = value.untyped_storage().data_ptr()
        return {pointer} if pointer else set()
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return set().union(*(storages(torch, item) for item in items))


def buffers(torch, data, paths: list) -> set[int]:
    """Storages of the inputs the supervisor declared as output buffers (paths into the input's nesting)."""
    found = set()
    for path in paths:
        value = data
        try:
            for step in path:
                value = value[step]
        except (KeyError, IndexError, TypeError):
            continue
        if isinstance(value, torch.Tensor):
            found |= storages(torch, value)
    return found


_CUDART: list = []  # the CUDA runtime torch loaded (None where there is none), found on first use


def reset_persisting_l2() -> None:
    """cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize = 6, 0), then cudaCtxResetPersistingL2Cache()."""
    import ctypes
    import ctypes.util

    if not _CUDART:
        try:
            _CUDART.append(ctypes.CDLL(ctypes.util.find_library("cudart") or "libcudart.so.12"))
        except OSError:  # no runtime by that name: nothing we could reset
            _CUDART.append(None)
    if _CUDART[0] is not None:
        _CUDART[0].cudaDeviceSetLimit(ctypes.c_int(6), ctypes.c_size_t(0))
        _CUDART[0].cudaCtxResetPersistingL2Cache()


def cpu_flush_bytes() -> int:
    """What the worker writes before each call on a CPU (docs/authoring.md, rule 7): twice the largest cache of one
    core (L2; read from sysfs), and no less than CPU_FLUSH_MIN_BYTES. The shared L3 is left alone: on a server it
    holds hundreds of MiB, and writing that much before every call would cost more than most kernels."""
    largest, base = 0, "/sys/devices/system/cpu/cpu0/cache"
    for index in os.listdir(base) if os.path.isdir(base) else ():
        try:
            with open(f"{base}/{index}/level") as level, open(f"{base}/{index}/size") as size:
                if int(level.read()) == 2:
                    largest = max(largest, int(size.read().strip().removesuffix("K")) << 10)
        except (OSError, ValueError):
            continue
    return max(2 * largest, CPU_FLUSH_MIN_BYTES)


class Worker:
    def __init__(self, torch, kernel, rank: int, world_size: int):
        self.torch, self.kernel, self.rank, self.world_size = torch, kernel, rank, world_size
        self.outputs: list = []  # input paths the current request may return (declared output buffers)
        self.batch = False  # the current request is a batch: a list of inputs, one kernel call each, one window
        self.flush_buffer = self.cpu_flush_buffer = None

    def cuda_device(self, data):
        """The device of the first CUDA tensor in the input (nested: a batch is a list of inputs), else None."""
        if isinstance(data, self.torch.Tensor):
            return data.device if data.is_cuda else None
        items = data.values() if isinstance(data, dict) else data if isinstance(data, (list, tuple)) else ()
        return next((device for device in map(self.cuda_device, items) if device is not None), None)

    def flush_l2(self, device) -> None:
        """Write twice the device's L2 on the timing stream, outside the timed window (docs/authoring.md, rule 7).
        First the persisting-L2 carve-out goes back to 0: ordinary writes cannot evict lines a kernel marked
        persisting (pygpubench #49)."""
        reset_persisting_l2()
        if self.flush_buffer is None:
            l2 = getattr(self.torch.cuda.get_device_properties(device), "L2_cache_size", 0) or (64 << 20)
            self.flush_buffer = self.torch.empty(2 * l2, dtype=self.torch.int8, device=device)
        self.flush_buffer.zero_()

    def flush_cpu_caches(self) -> None:
        """Write the core's caches full, outside the timed window (rule 7). One buffer for the worker's life, as on a
        GPU: with one allocated for each call, an honest submission that keeps its inputs (an id() cache) had calls
        measured at 3.6 ms around a 0.3 ms kernel, each new buffer on fresh pages, and failed the cross-check."""
        if self.cpu_flush_buffer is None:
            self.cpu_flush_buffer = self.torch.empty(cpu_flush_bytes(), dtype=self.torch.int8)
        self.cpu_flush_buffer.fill_(42)

    def barrier(self) -> None:
        if self.world_size > 1:
            self.torch.distributed.barrier()

    def run(self, kind: str, data) -> tuple[dict, object]:
        torch = self.torch
        device = self.cuda_device(data)
        flush = kind != "echo"  # an echo times the round trip alone (harness_measure.Overhead)
        if device is not None:
            if flush:
                self.flush_l2(device)
            torch.cuda.synchronize(device)
        elif flush:
            self.flush_cpu_caches()
        self.barrier()
        if kind in ("ping", "echo"):  # the input goes back: its encoding stands in for the output's in the calibration
            return {"kind": "done", "ns": 0}, data
        if kind == "profile":
            return self.profile(data, device)
        kernel = self.kernel
        if self.batch:  # docs/authoring.md, "Batched timing": every input of the batch inside the one window
            def kernel(batch):
                return [self.kernel(item) for item in batch]
        if device is not None:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            output = kernel(data)
            end.record()
            torch.cuda.synchronize()  # device-wide: work on side streams belongs to the sample too
            self.barrier()
            elapsed = int(start.elapsed_time(end) * 1e6)
        else:
            started = _perf_counter_ns()
            output = kernel(data)
            self.barrier()
            elapsed = _perf_counter_ns() - started
        problem = timers_intact(torch)
        if not problem and storages(torch, output) & (storages(torch, data) - buffers(torch, data, self.outputs)):
            problem = "output shares storage with an input"
        return {"kind": "done", "ns": elapsed, "error": problem}, output

    def profile(self, data, device) -> tuple[dict, object]:
        if device is not None and os.environ.get("POPCORN_PROFILE_TOOL"):
            return self.profile_under_tool(data, device)
        from torch.profiler import ProfilerActivity, profile, record_function

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device is not None else [])
        with profile(activities=activities) as profiler:
            with record_function("custom_kernel"):
                output = self.kernel(data)
            if device is not None:
                self.torch.cuda.synchronize()
        sort = "cuda_time_total" if device is not None else "cpu_time_total"
        table = profiler.key_averages().table(sort_by=sort, row_limit=25)
        return {"kind": "done", "ns": 0, "report": table}, output

    def profile_under_tool(self, data, device) -> tuple[dict, object]:
        """Under Nsight Compute or rocprofv3 (the runner set POPCORN_PROFILE_TOOL): warm-up calls first, outside
        any range, so one-time work (compilation, autotuning, workspace set-up) is not what gets captured; then one
        steady-state call inside the `custom_kernel` range, the only range the runner's capture keeps."""
        torch = self.torch
        for _ in range(PROFILE_WARM_UP_CALLS):
            self.kernel(data)
        torch.cuda.synchronize(device)
        torch.cuda.nvtx.range_push("custom_kernel")
        output = self.kernel(data)
        torch.cuda.synchronize(device)
        torch.cuda.nvtx.range_pop()
        return {"kind": "done", "ns": 0, "report": "captured by the runner's profiler"}, output


def steady_heap() -> None:
    """Set glibc's malloc as a long-running process's ends up, so that what a request does around the kernel does
    not decide whether the kernel's own temporaries land on fresh pages (whose faults are timed as the kernel's).

    By default glibc raises its mmap threshold (blocks above it get pages of their own) to the largest block freed,
    up to 32 MiB, and gives the top of the heap back above twice that threshold. A stock harness process holds its
    input across calls and settles there. The worker's traffic does not: each request's body, the copy of its
    input and the packed output are freed together, which gives the heap back, and the kernel's next temporary is
    faulted in again. On a 12 MiB temporary that cost 3,000 faults (about 40% of the call) on some calls and not
    others. Fixed at that ceiling, blocks up to 32 MiB reuse the heap's pages and larger ones are mapped afresh on
    every call, as they are in the stock process."""
    import ctypes

    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:  # glibc; another C library keeps its own policy
        mallopt(M_MMAP_THRESHOLD, STEADY_MMAP_THRESHOLD)
        mallopt(M_TRIM_THRESHOLD, 2 * STEADY_MMAP_THRESHOLD)


def answer(worker: Worker, header: dict, body: bytearray, replies: int) -> None:
    try:
        worker.outputs = header.get("outputs") if isinstance(header.get("outputs"), list) else []
        worker.batch = header.get("batch") is True
        reply, output = worker.run(str(header.get("kind")), unpack(worker.torch, header, body))
        reply_header, reply_body = pack(worker.torch, output)
        write_frame(replies, {**reply, **reply_header}, reply_body)
    except Exception as exc:  # noqa: BLE001 - the kernel's failure is this call's failure
        write_frame(replies, {"kind": "done", "ns": 0, "error": f"{type(exc).__name__}: {exc}"})


def serve(requests: int, replies: int) -> int:
    import warnings

    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch

    torch.set_num_threads(1)  # see eval.py: side-by-side runs on few cores
    rank, world_size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if torch.cuda.is_available():
            torch.cuda.set_device(rank % torch.cuda.device_count())
        torch.distributed.init_process_group(backend, rank=rank, world_size=world_size)
    bind_event_timer(torch)
    try:
        import submission
        from submission import custom_kernel

        # Some reference-kernels problems ask for a compile_kernel() that builds the kernel once, untimed, before the
        # stages (runner/task/stock_versions.py); it runs here, before the first request.
        compile_kernel = getattr(submission, "compile_kernel", None)
        if callable(compile_kernel):
            compile_kernel()
    except BaseException as exc:  # noqa: BLE001 - the submission's import failure is its verdict
        write_frame(replies, {"kind": "failed", "error": f"importing the submission failed: {type(exc).__name__}: {exc}"})
        return 1
    worker = Worker(torch, custom_kernel, rank, world_size)
    # No collector pauses inside a request: they would count against the call in the supervisor's CPU-clock
    # measurement without being part of the kernel (reference counting frees what calls allocate, and the loop
    # below collects cycles between requests).
    gc.collect()
    gc.freeze()
    gc.disable()
    steady_heap()
    write_frame(replies, {"kind": "ready"})
    while True:
        header, body = read_frame(requests, 1 << 40)
        if header.get("kind") == "exit":
            return 0
        # The request's values die with answer()'s frame: none of them is alive while the next kernel runs.
        answer(worker, header, body, replies)
        del header, body
        # What the request left in reference cycles (the submission's own, a traceback) is freed now, after the
        # reply and outside any timed window; with the collector off it would stay, the heap would grow by it on
        # every call, and later calls would be timed on fresh pages. Cheap: the frozen objects are not scanned.
        gc.collect()


if __name__ == "__main__":
    request_fd, reply_fd = int(sys.argv[1]), int(sys.argv[2])
    sys.exit(serve(request_fd, reply_fd))
