"""The worker half of the example harness (docs/authoring.md, "The harness protocol"): the only process that imports and runs user code.

The supervisor (eval.py) starts it as `python harness_worker.py <request fd> <reply fd>` in a directory holding
only the submission and the modules it may import (never reference.py or eval.py), with no POPCORN_* variables
and no inherited result pipe. It answers requests in frames (see `write_frame`): `call` (run the kernel once on
the given input and report its time), `ping` (the same round trip with no kernel, echoing the input: the
supervisor's calibration), `profile` (one call under torch.profiler) and `exit`.

Nothing here is trusted by the supervisor: user code can patch this module at will. Its checks exist to give
honest submissions precise messages; the supervisor re-checks outputs and times every request from its side.
Frames and values travel as harness_wire.py encodes them (never pickle).
"""

from __future__ import annotations

import gc
import os
import sys
import time

from harness_wire import pack, read_frame, unpack, widen_pipe, write_frame

# Calls before the captured one under an external profiler (see Worker.profile_under_tool).
PROFILE_WARM_UP_CALLS = 3
# Bound before the submission is imported.
_TIME_FUNCTIONS = {name: getattr(time, name) for name in ("perf_counter", "perf_counter_ns", "monotonic",
                                                          "monotonic_ns", "time", "time_ns", "process_time_ns")}
_perf_counter_ns = _TIME_FUNCTIONS["perf_counter_ns"]

# ---- the worker --------------------------------------------------------------------------------------------------

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


class Worker:
    def __init__(self, torch, kernel, rank: int, world_size: int):
        self.torch, self.kernel, self.rank, self.world_size = torch, kernel, rank, world_size
        self.outputs: list = []  # input paths the current request may return (declared output buffers)
        self.flush_buffer = None

    def cuda_device(self, data):
        leaves = [data] if isinstance(data, self.torch.Tensor) else \
            [v for v in (data.values() if isinstance(data, dict) else data if isinstance(data, (list, tuple)) else ())
             if isinstance(v, self.torch.Tensor)]
        return next((leaf.device for leaf in leaves if leaf.is_cuda), None)

    def flush_l2(self, device) -> None:
        """Write twice the device's L2 on the timing stream, outside the timed window (docs/authoring.md, rule 7).
        First the persisting-L2 carve-out goes back to 0: ordinary writes cannot evict lines a kernel marked
        persisting (pygpubench #49)."""
        reset_persisting_l2()
        if self.flush_buffer is None:
            l2 = getattr(self.torch.cuda.get_device_properties(device), "L2_cache_size", 0) or (64 << 20)
            self.flush_buffer = self.torch.empty(2 * l2, dtype=self.torch.int8, device=device)
        self.flush_buffer.zero_()

    def barrier(self) -> None:
        if self.world_size > 1:
            self.torch.distributed.barrier()

    def run(self, kind: str, data) -> tuple[dict, object]:
        torch = self.torch
        device = self.cuda_device(data)
        if device is not None:
            self.flush_l2(device)
            torch.cuda.synchronize(device)
        self.barrier()
        if kind == "ping":  # the input goes back: its encoding stands in for the output's in the calibration
            return {"kind": "done", "ns": 0}, data
        if kind == "profile":
            return self.profile(data, device)
        if device is not None:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            output = self.kernel(data)
            end.record()
            torch.cuda.synchronize()  # device-wide: work on side streams belongs to the sample too
            self.barrier()
            elapsed = int(start.elapsed_time(end) * 1e6)
        else:
            started = _perf_counter_ns()
            output = self.kernel(data)
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
        # stages (runner/stock_versions.py); it runs here, before the first request.
        compile_kernel = getattr(submission, "compile_kernel", None)
        if callable(compile_kernel):
            compile_kernel()
    except BaseException as exc:  # noqa: BLE001 - the submission's import failure is its verdict
        write_frame(replies, {"kind": "failed", "error": f"importing the submission failed: {type(exc).__name__}: {exc}"})
        return 1
    worker = Worker(torch, custom_kernel, rank, world_size)
    # No collector pauses inside a request: they would count against the call in the supervisor's CPU-clock
    # measurement without being part of the kernel (reference counting still frees what calls allocate).
    gc.collect()
    gc.freeze()
    gc.disable()
    write_frame(replies, {"kind": "ready"})
    while True:
        header, body = read_frame(requests, 1 << 40)
        if header.get("kind") == "exit":
            return 0
        try:
            worker.outputs = header.get("outputs") if isinstance(header.get("outputs"), list) else []
            reply, output = worker.run(str(header.get("kind")), unpack(torch, header, body))
            reply_header, reply_body = pack(torch, output)
            write_frame(replies, {**reply, **reply_header}, reply_body)
        except Exception as exc:  # noqa: BLE001 - the kernel's failure is this call's failure
            write_frame(replies, {"kind": "done", "ns": 0, "error": f"{type(exc).__name__}: {exc}"})


if __name__ == "__main__":
    request_fd, reply_fd = int(sys.argv[1]), int(sys.argv[2])
    sys.exit(serve(request_fd, reply_fd))


# ---- the supervisor's handle on its workers ------------------------------------------------------------------------


class WorkerDied(Exception):
    """The worker exited, or broke the frame protocol (which is how forged output on its pipe ends)."""


class Forked:
    """A worker forked from the supervisor, with the parts of Popen's interface the group uses."""

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG if deadline is not None else 0)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                raise TimeoutError(f"worker {self.pid} is still running")
            else:
                time.sleep(0.01)
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass


def become_worker(directory: str, source_dir: str, env: dict, requests: int, replies: int,
                  deferred: bool = False) -> None:
    """The child side of a fork: drop everything of the supervisor that user code must not reach (its file
    descriptors, environment, working directory, import path), then serve. With `deferred`, the submission is
    imported only once the supervisor sends `start` (a worker forked early for a later stage of a chain, eval.py);
    any other frame, or the pipe closing, ends it unused. Never returns."""
    code = 1
    try:
        os.chdir(directory)
        for name in os.listdir("/proc/self/fd"):
            if int(name) not in (0, 1, 2, requests, replies):
                try:
                    os.close(int(name))
                except OSError:
                    pass
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.environ.clear()
        os.environ.update(env)
        sys.path[:] = [directory] + [p for p in sys.path if p and os.path.abspath(p) != source_dir]
        sys.argv = ["harness_worker.py", str(requests), str(replies)]
        import importlib

        importlib.invalidate_caches()
        if deferred:
            try:
                header, _ = read_frame(requests, 0)
            except (EOFError, OSError, ValueError):
                header = {}
            if header.get("kind") != "start":
                code = 0
                return
        code = serve(requests, replies)
    except BaseException:  # noqa: BLE001 - reported on stderr; the supervisor sees the pipe close
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class WorkerGroup:
    """One worker per rank, started in a fresh directory with only the files user code may import.

    With `fork`, the supervisor forks itself (it must not hold a secret yet, and torch must not have touched a GPU)
    so that the worker starts with torch already imported; otherwise each rank is a fresh interpreter. With
    `deferred` (fork only), the forked ranks wait for `start()` before they import the submission."""

    def __init__(self, source_dir: str, hidden: tuple[str, ...], world_size: int = 1, fork: bool = False,
                 deferred: bool = False):
        import shutil
        import socket
        import subprocess
        import tempfile

        self.directory = tempfile.mkdtemp(prefix="kb-worker-")
        for name in os.listdir(source_dir):
            path = os.path.join(source_dir, name)
            if name not in hidden and not name.startswith(".") and os.path.isfile(path):
                shutil.copyfile(path, os.path.join(self.directory, name))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("POPCORN_", "KERNELBOT_"))}
        if world_size > 1:
            with socket.socket() as probe:  # a free port for the ranks' rendezvous
                probe.bind(("127.0.0.1", 0))
                env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(probe.getsockname()[1]))
            # Inside the runner's network namespace only the loopback exists; the hostname may not resolve to it.
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")
            env.setdefault("NCCL_SOCKET_IFNAME", "lo")
        self.ranks = []
        for rank in range(world_size):
            requests_read, requests_write = os.pipe()
            replies_read, replies_write = os.pipe()
            for fd in (requests_write, replies_write):
                widen_pipe(fd)
            rank_env = {**env, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size)}
            if fork:
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    become_worker(self.directory, source_dir, rank_env, requests_read, replies_write, deferred)
                process = Forked(pid)
            else:
                process = subprocess.Popen(
                    [sys.executable, "harness_worker.py", str(requests_read), str(replies_write)],
                    cwd=self.directory, env=rank_env, stdin=subprocess.DEVNULL,
                    pass_fds=(requests_read, replies_write))
            os.close(requests_read)
            os.close(replies_write)
            self.ranks.append((process, requests_write, replies_read, ((~process.pid) << 3) | 2))
        self.deferred = fork and deferred

    def start(self, max_body: int) -> str:
        """Empty once every rank imported the submission, else why not."""
        if self.deferred:
            self.deferred = False
            try:
                for _, requests, _, _ in self.ranks:
                    write_frame(requests, {"kind": "start"})
            except OSError as exc:
                raise WorkerDied(f"the worker exited ({exc})") from exc
        for _, _, replies, _ in self.ranks:
            header, _ = self.receive(replies, max_body)
            if header.get("kind") != "ready":
                return str(header.get("error") or "the worker did not start")
        return ""

    def receive(self, fd: int, max_body: int) -> tuple[dict, bytearray]:
        try:
            return read_frame(fd, max_body)
        except (EOFError, OSError) as exc:
            raise WorkerDied(f"the worker exited ({exc})") from exc
        except ValueError as exc:
            raise WorkerDied(f"worker protocol violation: {exc}") from exc

    def cpu_ns(self) -> int | None:
        """The most CPU time any rank has used (its kernel-side clock, which user code cannot alter)."""
        try:
            return max(time.clock_gettime_ns(clock) for _, _, _, clock in self.ranks)
        except OSError:
            return None

    def exchange(self, kind: str, frames: list[tuple[dict, bytearray]], max_body: int):
        """Send one request per rank, then collect the replies. Returns (replies, wall ns, worker CPU ns|None)."""
        cpu_before, started = self.cpu_ns(), _perf_counter_ns()
        try:
            for (_, requests, _, _), (header, body) in zip(self.ranks, frames):
                write_frame(requests, {**header, "kind": kind}, body)
        except OSError as exc:
            raise WorkerDied(f"the worker exited ({exc})") from exc
        replies = [self.receive(replies, max_body) for _, _, replies, _ in self.ranks]
        wall, cpu_after = _perf_counter_ns() - started, self.cpu_ns()
        cpu = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
        return replies, wall, cpu

    def stop(self) -> None:
        """End every rank (an unstarted deferred one too) and remove the directory; a second call does nothing."""
        import shutil

        ranks, self.ranks = self.ranks, []
        for _process, requests, _replies, _ in ranks:
            try:
                write_frame(requests, {"kind": "exit"})
            except OSError:
                pass
        for process, requests, replies, _ in ranks:
            try:
                process.wait(timeout=2)
            except Exception:  # noqa: BLE001 - a worker that does not leave is killed
                process.kill()
                process.wait()
            os.close(requests)
            os.close(replies)
        shutil.rmtree(self.directory, ignore_errors=True)
