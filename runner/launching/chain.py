"""All stages of one run in one harness process: the chain extension of the harness protocol
(docs/authoring.md).

A harness that names `KERNELBOT_HARNESS_CHAIN_FD` in its text (the example harness, problems/examples/eval.py,
which also judges reference-kernels problems, runner/task/harness_choice.py) is started once per run as
`<program> chain STAGE=CASEFILE ...`, with that variable naming its end of a unix socket (SOCK_SEQPACKET). For each
stage the runner sends `{"stage": STAGE}` with two fresh pipes attached (SCM_RIGHTS): the stage's result pipe
(POPCORN_FD) and its data pipe (POPCORN_DATA_FD). The harness runs the stage, closes both pipes, flushes its
output and answers `{"stage": STAGE, "exit": CODE}`, CODE being the exit code `<program> STAGE CASEFILE` would
have ended with. The runner judges the stage and either sends the next one or closes the socket, which ends the
process. Everything a stage's EvalResult holds is kept per stage: stdout and stderr are cut at the answer (the
harness flushed them, and its worker ended, before answering), the pipes are the stage's own, the stage's timeout
runs from the moment it was sent (the first stage's from the process start), and a stage that runs out of it is
killed with the whole process group, as a lone process would be. Any harness without the marker keeps one process
per stage.
"""

from __future__ import annotations

import json
import os
import select
import selectors
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.launching.process import (
    CAPTURE_LIMIT,
    DATA_LIMIT,
    DRAIN_GRACE_SECONDS,
    RESULT_LIMIT,
    CapturedStream,
    ProcessOutcome,
    close_quietly,
    has_exited,
    kill_group,
    open_pidfd,
    read_chunk,
)

CHAIN_FD_VARIABLE = "KERNELBOT_HARNESS_CHAIN_FD"
CHAIN_STAGE = "chain"
EXIT_GRACE_SECONDS = 2.0  # after the socket closed, how long the harness may take to leave on its own


CHAIN_SWITCH = "KB_HARNESS_CHAIN"  # `false` on a runner host: one process per stage for every harness


def chain_enabled() -> bool:
    """Whether this runner uses the chain where the harness speaks it (read per run, never at import)."""
    return os.environ.get(CHAIN_SWITCH, "true").strip().lower() not in ("0", "false", "no", "off")


def speaks_chain(main_source: str | None) -> bool:
    """Whether the harness's main file declares the chain extension."""
    return bool(main_source) and CHAIN_FD_VARIABLE in (main_source or "")


@dataclass(frozen=True)
class ChainStage:
    harness_stage: str
    case_file: str
    timeout: float


def chain_argv(program: list[str], stages: list[ChainStage]) -> list[str]:
    return [*program, CHAIN_STAGE, *(f"{stage.harness_stage}={stage.case_file}" for stage in stages)]


def run_chain(argv: list[str], stages: list[ChainStage], *, proceed: Callable[[int, ProcessOutcome], bool],
              cwd: str, env: dict[str, str], reap: Callable[[], None] | None = None,
              launch: Callable[..., Any] | None = None) -> list[ProcessOutcome]:
    """Run the chain; `proceed(index, outcome)` is asked after each stage whether the next one runs. Returns one
    ProcessOutcome per stage that ran, in the shape run_process gives a lone process. `launch` as for run_process
    (runner/launching/process.py)."""
    env = dict(env)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    env[CHAIN_FD_VARIABLE] = str(theirs.fileno())
    out_fds: list[int] = []
    proc: Any  # a Popen, or the warm runner's handle (runner/launching/warm_client.py)
    try:
        start = time.monotonic()
        if launch is None:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, pass_fds=(theirs.fileno(),), start_new_session=True)
            out_fds = [proc.stdout.fileno(), proc.stderr.fileno()]
        else:
            ends = [os.pipe(), os.pipe()]
            out_fds = [ends[0][0], ends[1][0]]
            try:
                proc = launch(argv, cwd=cwd, env=env, pass_fds=(theirs.fileno(),), stdout=ends[0][1],
                              stderr=ends[1][1])
            finally:
                os.close(ends[0][1])
                os.close(ends[1][1])
    except BaseException:
        ours.close()
        for fd in out_fds if launch is not None else []:
            os.close(fd)
        raise
    finally:
        theirs.close()
    chain = _Chain(proc, ours, out_fds, reap, forked=launch is not None)
    try:
        return chain.run(stages, proceed, start)
    finally:
        chain.finish()
        if launch is None:
            proc.stdout.close()
            proc.stderr.close()
        else:
            for fd in out_fds:
                close_quietly(fd)
            proc.release()


class _Chain:
    def __init__(self, proc, control: socket.socket, out_fds: list[int], reap, forked: bool) -> None:
        self.proc, self.control, self.reap, self.forked = proc, control, reap, forked
        self.selector = selectors.DefaultSelector()
        self.pipes: dict[int, str] = {}  # registered pipes: stdout, stderr and the current stage's result, data
        for fd, name in zip(out_fds, ("stdout", "stderr")):
            self.watch(fd, name)
        self.selector.register(control, selectors.EVENT_READ, "control")
        self.exit_fd = proc.exit_fd if forked else open_pidfd(proc.pid)
        if self.exit_fd is not None:
            self.selector.register(self.exit_fd, selectors.EVENT_READ, "exit")
        self.ended = False  # the process exited or was killed
        self.unfinished: ProcessOutcome | None = None  # the stage the process exited in (exit code known last)

    def watch(self, fd: int, name: str) -> None:
        os.set_blocking(fd, False)
        self.selector.register(fd, selectors.EVENT_READ, name)
        self.pipes[fd] = name

    def forget(self, fd: int) -> None:
        if self.pipes.pop(fd, None) is not None:
            self.selector.unregister(fd)

    def run(self, stages: list[ChainStage], proceed, start: float) -> list[ProcessOutcome]:
        outcomes: list[ProcessOutcome] = []
        for index, stage in enumerate(stages):
            outcome = self.stage(stage, start if index == 0 else time.monotonic(), chained=index > 0)
            outcomes.append(outcome)
            if self.ended or not proceed(index, outcome):
                break
        return outcomes

    def stage(self, stage: ChainStage, start: float, chained: bool) -> ProcessOutcome:
        streams = {"stdout": CapturedStream(CAPTURE_LIMIT), "stderr": CapturedStream(CAPTURE_LIMIT),
                   "result": CapturedStream(RESULT_LIMIT), "data": CapturedStream(DATA_LIMIT)}
        (result_read, result_write), (data_read, data_write) = os.pipe(), os.pipe()
        try:
            socket.send_fds(self.control, [json.dumps({"stage": stage.harness_stage}).encode()],
                            [result_write, data_write])
        except OSError:
            pass  # the harness is gone: its exit ends the stage below
        finally:
            os.close(result_write)
            os.close(data_write)
        self.watch(result_read, "result")
        self.watch(data_read, "data")
        try:
            exit_code, timed_out, ended_at = self.pump(streams, start + stage.timeout)
        finally:
            for fd in (result_read, data_read):
                self.forget(fd)
                close_quietly(fd)
        outcome = ProcessOutcome(exit_code=114 if timed_out else exit_code,
                                 duration=stage.timeout if timed_out else ended_at - start, timed_out=timed_out,
                                 started_at=start, forked=self.forked, chained=chained, **streams)
        if self.ended and not timed_out:
            self.unfinished = outcome
        return outcome

    def pump(self, streams: dict[str, CapturedStream], deadline: float) -> tuple[int, bool, float]:
        """Until the harness answers for the stage, the process ends or the deadline passes: (exit code, timed
        out, when the stage ended). The exit code of a process that ended is filled in by finish()."""
        while True:
            now = time.monotonic()
            if self.exit_fd is None and has_exited(self.proc.pid):
                return self.end(streams, now, timed_out=False)
            if now >= deadline:
                return self.end(streams, now, timed_out=True)
            wait = deadline - now if self.exit_fd is not None else min(deadline - now, 0.05)
            for key, _ in self.selector.select(max(wait, 0.0)):
                if key.data == "exit":
                    return self.end(streams, time.monotonic(), timed_out=False)
                if key.data == "control":
                    answer = self.answer()
                    if answer is None:  # the harness closed its end: its exit follows
                        self.selector.unregister(self.control)
                        continue
                    ended_at = time.monotonic()
                    for fd in list(self.pipes):  # all the stage wrote is in the pipes now
                        while self.read(fd, streams):
                            pass
                    return answer, False, ended_at
                if key.fd in self.pipes:
                    self.read(key.fd, streams)

    def read(self, fd: int, streams: dict[str, CapturedStream]) -> bool:
        """One chunk of a pipe into its stream; False when there is nothing more now (EOF: the pipe is forgotten)."""
        chunk = read_chunk(fd)
        if chunk:
            streams[self.pipes[fd]].feed(chunk)
            return True
        if chunk == b"":
            self.forget(fd)
        return False

    def answer(self) -> int | None:
        try:
            message = self.control.recv(4096)
        except OSError:
            message = b""
        if not message:
            return None
        try:
            return int(json.loads(message)["exit"])
        except (ValueError, KeyError, TypeError):
            return 1  # a malformed answer: the stage counts as crashed

    def end(self, streams: dict[str, CapturedStream], ended_at: float, timed_out: bool) -> tuple[int, bool, float]:
        """The process exited, or the stage ran out of time (the group is killed then): the stage ends, and the
        chain with it. What the pipes still hold is read for a short grace, as for a lone process."""
        self.ended = True
        kill_group(self.proc, self.reap)  # the timeout kill; after an exit, the stragglers
        limit = ended_at + DRAIN_GRACE_SECONDS
        while self.pipes and time.monotonic() < limit:
            for key, _ in self.selector.select(max(limit - time.monotonic(), 0.0)):
                if key.fd in self.pipes:
                    self.read(key.fd, streams)
        return 0, timed_out, ended_at

    def finish(self) -> None:
        """Close the socket (the harness then leaves), give it a moment, then kill and reap the group; the exit
        code of a process that ended mid-stage goes to that stage."""
        self.control.close()
        if not self.ended:
            deadline = time.monotonic() + EXIT_GRACE_SECONDS
            while time.monotonic() < deadline:
                if self.exit_fd is not None:
                    if select.select([self.exit_fd], [], [], max(deadline - time.monotonic(), 0.0))[0]:
                        break
                elif has_exited(self.proc.pid):
                    break
                else:
                    time.sleep(0.01)
        kill_group(self.proc, self.reap)
        self.proc.wait()
        if self.unfinished is not None:
            self.unfinished.exit_code = self.proc.returncode
        self.selector.close()
        if self.exit_fd is not None and not self.forked:
            close_quietly(self.exit_fd)
