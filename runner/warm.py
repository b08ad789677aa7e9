"""The warm runner: a long-lived fork server holding Python and torch imported, from which every harness, warm-up
and compiler process of a run is forked instead of started cold (`python -m runner.warm SOCKET`).

It stays pristine: it never imports user code, never touches a GPU (importing torch does not initialise CUDA),
and never holds anything of a run beyond the request naming argv, directory and environment. The secret seed
never passes through it: the runner hands the child a pipe holding its secret variables, which only the forked
child reads. Each child is a fresh process that then gets what a cold start gives (runner/launching/warm_child.py): its
own session, only the pipes of its run, the limits, network namespace and uid of runner/confinement/confine.py, the
scrubbed environment, the run directory as working directory and `sys.path[0]`, and the program run as `__main__` with
its usual argv (`runpy`); a program that is not a Python script is exec'd after the same confinement.

It also forks the runners themselves (`{"runner": [args of python -m runner]}`, from the local backend): a runner
forked from here starts with its modules imported and the host's system info and sandbox capability already
known, reads its payload only after the fork, and leads its own session, outliving the connection that asked for
it (it is reaped here when it ends, and found again by the backend through its pid and start time).

Protocol, over a SOCK_SEQPACKET unix socket in a 0700 directory, one connection per child: the runner sends one
JSON request with the child's descriptors attached (SCM_RIGHTS); the server answers `{"pid": n}`, later
`{"exit": code}` once the child ended. The child is reaped only when the runner closes the connection, so its
pid (= its process group id) cannot be reused before the runner has killed the group. A connection closed early
(a runner that died) gets the child's group killed.

Between runs it also builds the next run's sandbox ahead (runner/confinement/sandbox.py `prebuild`, in the runs'
directory of the last runner it forked), and hands it to the next runner it forks: bwrap and the sandbox's init start
while no run waits. It reaps that bwrap process when the run has ended it; a runner that cannot use it ends it.

The server is single-threaded (a selector over the listener, the connections and the children's pidfds), so
forking from it is safe. On SIGTERM, or when the process that started it dies, it stops accepting and exits once
its children have ended.
"""

from __future__ import annotations

import array
import ctypes
import json
import os
import selectors
import signal
import socket
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at import this module stays standard-library only (see fork)
    from runner.confinement.sandbox import RunSandbox

MAX_REQUEST = 1 << 20
MAX_FDS = 16
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
# Modules a harness needs anyway, imported once here rather than in every child.
PRELOAD = ("runpy", "json", "hmac", "hashlib", "math", "re", "base64", "struct", "selectors", "shutil",
           "tempfile", "subprocess", "traceback", "importlib", "socket", "ctypes", "fcntl", "resource")


def preload() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    with warnings.catch_warnings():  # CPU wheels warn when numpy is absent; no filter may stay behind
        warnings.simplefilter("ignore")
        import torch  # noqa: F401
    # Importing torch leaves ~130 finalizers that deregister its operator libraries at exit: 0.1-0.4 s of every
    # process's exit spent tidying a process that is about to vanish. The children skip them (those a run itself
    # creates still run).
    import weakref

    for finalizer in list(weakref.finalize._registry):  # type: ignore[attr-defined] # noqa: SLF001
        finalizer.atexit = False


def receive(conn: socket.socket) -> tuple[dict, list[int]]:
    fds = array.array("i")
    data, ancillary, _, _ = conn.recvmsg(MAX_REQUEST, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return (json.loads(data) if data else {}), list(fds)


class Child:
    def __init__(self, conn: socket.socket | None, pid: int, pidfd: int) -> None:
        self.conn, self.pid, self.pidfd, self.exited, self.reaped = conn, pid, pidfd, False, False
        self.workdir: str | None = None  # a runner's --workdir: where the next run's sandbox is built ahead


def _workdir(arguments: list[str]) -> str | None:
    for index, argument in enumerate(arguments):
        if argument == "--workdir" and index + 1 < len(arguments):
            return arguments[index + 1]
        if argument.startswith("--workdir="):
            return argument.split("=", 1)[1]
    return None


class Server:
    def __init__(self, path: str, base_path: list[str]) -> None:
        self.path, self.base_path = path, base_path
        self.selector = selectors.DefaultSelector()
        self.children: dict[int, Child] = {}  # by connection fd
        self.runners: dict[int, Child] = {}  # detached runners, by pid
        self.draining = False
        # a run sandbox built ahead (runner/confinement/sandbox.py prebuild), for the next runner forked
        self.spare: RunSandbox | None = None
        self.parent = os.getppid()  # may be 1 itself, in a container whose entry process started us
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(path)
        os.chmod(path, 0o600)
        self.listener.listen(64)
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")

    def serve(self) -> None:
        signal.signal(signal.SIGTERM, lambda *_: self.drain())
        self.prepare_spare(None)
        while not (self.draining and not self.children and not self.runners):
            for key, _ in self.selector.select(1.0):
                try:
                    self.handle(key.data)
                except Exception:  # noqa: BLE001 - one broken request must not end the server for every run
                    import traceback

                    traceback.print_exc()
            if os.getppid() != self.parent and not self.draining:  # whoever started us is gone
                self.drain()

    def handle(self, what) -> None:
        if what == "accept":
            self.accept()
        elif what[0] == "request":
            self.on_request(what[1])
        elif what[0] == "conn":
            self.on_connection(what[1])
        elif what[0] == "runner":
            self.on_runner_exit(what[1])
        elif what[0] == "sandbox":
            self.on_sandbox_exit(*what[1])
        else:
            self.on_exit(what[1])

    def drain(self) -> None:
        if not self.draining:
            self.draining = True
            if self.spare is not None:
                self.spare.__exit__(None, None, None)
                self.spare = None
            self.selector.unregister(self.listener)
            self.listener.close()
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def accept(self) -> None:
        if self.draining:  # SIGTERM closed the listener after select reported it
            return
        conn, _ = self.listener.accept()
        self.selector.register(conn, selectors.EVENT_READ, ("request", conn))  # read when it arrives, never block

    def on_request(self, conn: socket.socket) -> None:
        self.selector.unregister(conn)
        try:
            request, fds = receive(conn)
        except (OSError, ValueError):
            conn.close()
            return
        try:
            pid = self.fork(request, fds, conn)
        finally:
            for fd in fds:
                os.close(fd)
        if pid is None:
            conn.close()
            return
        if "runner" in request:  # detached: answered, then on its own
            runner = Child(None, pid, os.pidfd_open(pid))
            runner.workdir = _workdir(request["runner"])
            self.runners[pid] = runner
            self.selector.register(runner.pidfd, selectors.EVENT_READ, ("runner", runner))
            try:
                conn.send(json.dumps({"pid": pid}).encode())
            except OSError:
                pass
            conn.close()
            return
        child = Child(conn, pid, os.pidfd_open(pid))
        self.children[conn.fileno()] = child
        self.selector.register(conn, selectors.EVENT_READ, ("conn", child))
        self.selector.register(child.pidfd, selectors.EVENT_READ, ("exit", child))
        try:
            conn.send(json.dumps({"pid": pid}).encode())
        except OSError:
            pass  # the runner is gone: its closed connection gets the child killed and reaped

    def fork(self, request: dict, fds: list[int], conn: socket.socket) -> int | None:
        runner = request.get("runner")
        if runner is not None:
            if not isinstance(runner, list) or not all(isinstance(arg, str) for arg in runner) or len(fds) != 1:
                return None
        elif not isinstance(request.get("argv"), list) or not request["argv"]:
            return None
        sys.stdout.flush()
        sys.stderr.flush()
        spare = None
        if runner is not None:
            spare, self.spare = self.spare, None
        pid = os.fork()
        if pid == 0:
            # in the child only, after the fork: the server itself never becomes a run
            from runner.launching.warm_child import become, become_runner

            if runner is not None:
                keep: set[int] = set()
                if spare is not None:
                    # Project modules are imported by main(), once the server has hardened itself; at import this
                    # module stays standard-library only.
                    from runner.confinement.sandbox import offer

                    offer(spare)
                    keep = spare.descriptors()
                from runner.__main__ import main as run_main  # imported by main() already, as offer above

                become_runner(run_main, runner, fds[0], self.path, keep)  # never returns
            become(request, fds, self.base_path)  # never returns
        if spare is not None:
            self.disown(spare)
        return pid

    def prepare_spare(self, workdir: str | None) -> None:
        """Build the next run's sandbox now, while no run waits for it (bwrap and its init take tens of ms)."""
        if self.spare is None and not self.draining:
            from runner.confinement.sandbox import prebuild  # loaded by main() already: see offer above

            self.spare = prebuild(Path(workdir) if workdir else None)

    def disown(self, spare) -> None:
        """The forked runner owns the spare now; this server only reaps its bwrap process when it ends."""
        holder = spare.holder
        holder.disown()
        if spare._lock is not None:  # noqa: SLF001 - the runner holds the same lock through its own descriptor
            spare._lock.close()  # noqa: SLF001
        try:
            pidfd = os.pidfd_open(holder.process.pid)
        except OSError:
            return
        self.selector.register(pidfd, selectors.EVENT_READ, ("sandbox", (pidfd, holder.process.pid)))

    def on_sandbox_exit(self, pidfd: int, pid: int) -> None:
        self.selector.unregister(pidfd)
        os.close(pidfd)
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass

    def on_runner_exit(self, runner: Child) -> None:
        if runner.reaped:
            return
        runner.reaped = True
        self.selector.unregister(runner.pidfd)
        os.waitpid(runner.pid, 0)
        os.close(runner.pidfd)
        del self.runners[runner.pid]
        self.prepare_spare(runner.workdir)

    def on_exit(self, child: Child) -> None:
        if child.reaped or child.exited:  # a stale event of the same select round
            return
        self.selector.unregister(child.pidfd)
        info = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is None:
            return
        code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        child.exited = True
        assert child.conn is not None  # a child with its connection; detached runners end in on_runner_exit
        try:
            child.conn.send(json.dumps({"exit": code}).encode())
        except OSError:
            pass

    def on_connection(self, child: Child) -> None:
        """The runner closed its end (or sent something, which only ever means the same): reap the child."""
        if child.reaped:
            return
        assert child.conn is not None  # only a child with its connection has one to close
        try:
            child.conn.recv(16)
        except OSError:
            pass
        if not child.exited:
            self.selector.unregister(child.pidfd)
            for kill in (os.killpg, os.kill):  # the group, and the child itself should it not lead one yet
                try:
                    kill(child.pid, signal.SIGKILL)
                except OSError:
                    pass
        os.waitpid(child.pid, 0)
        child.reaped = True
        os.close(child.pidfd)
        self.selector.unregister(child.conn)
        del self.children[child.conn.fileno()]
        child.conn.close()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m runner.warm SOCKET", file=sys.stderr)
        return 2
    # What `python SCRIPT` has on sys.path after the script's own directory in a cold start, whose environment has
    # no PYTHONPATH (runner/confinement/environment.py drops it): ours without its first entry and without PYTHONPATH's.
    extra = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    base_path = [p for p in sys.path[1:] if os.path.abspath(p) not in extra]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    # No ptrace or /proc/<pid>/mem from processes of the same user: user code running as the runner's own user
    # (the fallback without root) must not reach into the process every later run is forked from.
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    import runner.__main__  # noqa: F401 - what a forked runner runs
    import runner.confinement.confine  # noqa: F401 - what each child applies
    import runner.launching.warm_child  # noqa: F401

    # after the dumpable flag is off: what the server imports from here on lives in every forked run
    from runner.confinement.sandbox import isolation_available, sandbox_level
    from runner.host.sysinfo import collect_system_info

    preload()
    # Known once here, inherited by every runner forked from here (both are cached per process).
    collect_system_info()
    isolation_available()
    sandbox_level()
    server = Server(argv[1], base_path)
    print(f"warm runner ready on {argv[1]}", flush=True)
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
