"""KernelBot example harness for Python problems: `python eval.py <test|benchmark|leaderboard|profile> <casefile>`.

Speaks the POPCORN_FD protocol of docs/authoring.md, "The harness protocol": `key: value` lines on the result pipe, a single `check: pass|fail`
at the end, exit 0 (all passed), 112 (a case failed), 111 (no usable POPCORN_FD), 113 (bad case file or seed),
2 (usage). Bulk samples go to the optional POPCORN_DATA_FD as JSON lines. It also speaks the chain extension
(`python eval.py chain STAGE=CASEFILE ...`, see `run_chain` and docs/authoring.md): every stage of a run in this
one process, each stage with its own pipes, its own exit code and a fresh worker.

This process is the supervisor of docs/authoring.md, "The harness protocol": it owns the case file, the seed, the result pipes, input
generation, the reference and checker, and the statistics; it never imports user code. The submission runs in a
worker (harness_worker.py, one per rank) started in a directory holding neither reference.py nor the supervisor's
files, without POPCORN_* variables and without the result pipes. The supervisor is non-dumpable, so a worker running as the same
user can neither ptrace it nor open its /proc files (memory, environment, file descriptors). Inputs and outputs
travel as plain bytes (never pickle); every input is fresh and the kernel gets its own copy; every timed output is
checked right after its sample. The worker reports each call's time; the supervisor times every request from its
side (wall clock, and the worker's CPU clock as the kernel sees it) and rejects samples whose reported time falls
short of what it measured by more than the overhead calibrated with no-op requests (docs/authoring.md, "The harness protocol"), which
defeats patched timers and work left to side threads.

The secret seed leaves the environment (and, by one re-exec, /proc/self/environ) at start-up and is mixed into
every case seed with a keyed one-way function. On a CPU the worker writes twice a core's L2 (at least 8 MiB) before
each call but leaves the shared last-level cache alone, and this harness records no telemetry, so its timings are
development-only (docs/authoring.md, "The harness protocol"); on CUDA inputs the worker times with CUDA events on its
stream, closes each sample with a device-wide synchronize and writes 2x the L2 before each call.

The supervisor is four files, shipped together wherever this one goes: this one is the process (argv, the case
file, the pipes, the seed, the chain), harness_supervisor.py the requests and stages, harness_group.py the worker
processes, harness_measure.py the timing method and statistics.
"""

from __future__ import annotations

import json
import os
import re
import sys

from harness_supervisor import Channel, Harness, worker_files

HARNESS_VERSION = "kernelbot-examples 0.6.5"
EXIT_FAILED, EXIT_NO_FD, EXIT_BAD_INPUT, EXIT_USAGE = 112, 111, 113, 2
STAGES = ("test", "benchmark", "leaderboard", "profile")
SEED_FD_VARIABLE = "KERNELBOT_HARNESS_SEED_FD"
# The chain extension of the protocol (docs/authoring.md, "Optional: every stage in one process (the chain)"): the runner, seeing this name in the harness's
# text, starts `eval.py chain STAGE=CASEFILE ...` once per run instead of one process per stage.
CHAIN, CHAIN_FD_VARIABLE = "chain", "KERNELBOT_HARNESS_CHAIN_FD"
# Values: an integer, a word, a [list] or (tuple) of integers; the words true/false are booleans (reference-kernels
# harnesses since 2026 read them so, runner/task/stock_versions.py).
PAIR = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(\[[-+0-9,\s]*\]|\([-+0-9,\s]*\)|[+-]?[0-9]+|[A-Za-z_][A-Za-z0-9_]*)\s*\Z")
BOOLEANS = {"true": True, "false": False}


def parse_case_line(line: str) -> dict:
    case = {}
    for part in line.split(";"):
        match = PAIR.match(part)
        if not match:
            raise ValueError(f"bad case line {line!r}")
        key, raw = match.groups()
        if raw[0] in "[(":
            items = [int(x) for x in raw[1:-1].split(",") if x.strip()]
            case[key] = items if raw[0] == "[" else tuple(items)
        elif raw in BOOLEANS:
            case[key] = BOOLEANS[raw]
        elif raw[0] in "+-0123456789":
            case[key] = int(raw)
        else:
            case[key] = raw
    return case


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
    """Torch and the worker machinery (harness_group imports the worker), imported only once the arguments and
    the case file were read: a usage error or a bad case file is answered without torch's seconds of start-up."""
    import warnings

    # CPU torch wheels warn on every import when numpy is absent; that noise would fill every report's stderr.
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch

    import harness_group as wire

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


# ---- the chain: all stages of one run in this one supervisor (docs/authoring.md, "Optional: every stage in one process (the chain)") ---------------------------


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
