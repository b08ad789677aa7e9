"""The child side of the warm runner (runner/warm.py): turn a fresh fork of the fork server into the process a cold
start would have given, then run the program. Never returns.

Order, as runner/confinement/confine.py for a cold start: a new session; only the run's descriptors (stdin from
/dev/null, stdout/stderr and the result pipes at the numbers the runner named); the seed, either as its unread pipe for
a harness that takes it so, or read here only for a program about to be exec'd (runner/launching/warm_client.py); the
limits, then either the run's bubblewrap sandbox (confine.join: the fork's own child runs the program inside, the fork
waits outside and mirrors its end) or the network namespace, the mount masks, the uid and no-new-privileges; the run
directory, the environment, a re-seeded `random`; and fresh standard streams. A Python script then runs as `__main__`
with its usual argv and `sys.path[0]` (runpy), and the process exits the way the interpreter would (atexit handlers,
non-daemon threads joined, streams flushed; only the finalizers torch left at its import in the server are skipped,
see runner/warm.py). Anything else is exec'd.
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from runner.confinement import confine

HIGH_FD = 512  # received descriptors are parked above any number the runner may name as a target
EXIT_CHILD_FAILED = 125


def _arrange_descriptors(request: dict, fds: list[int]) -> None:
    roles = request.get("fds", {})
    parked = {index: os.dup2(fd, HIGH_FD + index) for index, fd in enumerate(fds)}
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(parked[roles["stdout"]], 1)
    os.dup2(parked[roles["stderr"]], 2)
    targets = {0, 1, 2}
    for target, index in roles.get("pass", []):
        os.dup2(parked[index], int(target))  # inheritable, as pass_fds makes them for a cold start
        targets.add(int(target))
    secret = roles.get("secret")
    keep = targets | ({parked[secret]} if secret is not None else set())
    seed_pipe = roles.get("seed_pipe")
    if seed_pipe is not None:
        keep.add(parked[seed_pipe[0]])  # inheritable, as the harness's own re-exec leaves it
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    if secret is not None:
        os.set_inheritable(parked[secret], False)


def _read_secret_environment(request: dict, fds: list[int]) -> dict[str, str]:
    """Secret variables for a program about to be exec'd (the fresh image is all that keeps them); a harness
    taking its seed by pipe gets the pipe's number instead, the pipe itself unread."""
    roles = request.get("fds", {})
    if roles.get("seed_pipe") is not None:
        index, variable = roles["seed_pipe"]
        return {str(variable): str(HIGH_FD + int(index))}
    index = roles.get("secret")
    if index is None:
        return {}
    fd = HIGH_FD + index
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    values = json.loads(b"".join(chunks) or b"{}")
    return {str(k): str(v) for k, v in values.items()}


def _fresh_streams(env: dict[str, str]) -> None:
    """Standard streams as a fresh interpreter opens them on these descriptors (nothing buffered from the server)."""
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    # sys.__std*__ too, as a new interpreter sets them (typeshed calls them final)
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(  # type: ignore[misc]
        io.BufferedReader(io.FileIO(0, "r", closefd=False)))
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(  # type: ignore[misc]
        io.FileIO(1, "w", closefd=False), write_through=unbuffered, line_buffering=os.isatty(1))
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(  # type: ignore[misc]
        io.FileIO(2, "w", closefd=False), errors="backslashreplace", line_buffering=True)


def _run_as_main(script: str) -> None:
    """Run `script` as the program, as `python script` would. The module it runs in is both `__main__` and
    `__mp_main__`: multiprocessing aliased `__mp_main__` to the fork server's own main module when torch imported it,
    and a spawn pool's worker sends back objects of the script's classes under that name, which would not unpickle."""
    import builtins
    import types

    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=script, __cached__=None, __loader__=None, __package__=None, __spec__=None,
                         __builtins__=builtins)
    with open(script, "rb") as source:
        code = compile(source.read(), script, "exec")
    saved = {name: sys.modules.get(name) for name in ("__main__", "__mp_main__")}
    sys.modules["__main__"] = sys.modules["__mp_main__"] = main
    try:
        exec(code, main.__dict__)  # noqa: S102 - the run's own program, as the interpreter would run it
    finally:
        # As runpy does: the program's globals go with its module, so what only they hold (an unflushed file that a
        # harness never closed, say) is finalized before the process ends through os._exit.
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _run_python(script: str, args: list[str], base_path: list[str]) -> int:
    import atexit
    import threading
    import traceback

    directory = os.path.dirname(os.path.abspath(script))
    sys.argv = [script, *args]
    sys.path[:] = [directory, *base_path]
    sys.path_importer_cache.clear()
    _forget_shadowed_modules(directory)
    # multiprocessing resolves a relative __main__ path (a spawned worker re-imports it) against the directory its
    # process started in: here the fork server's, where a cold process would have started in the run directory.
    if "multiprocessing.process" in sys.modules:
        sys.modules["multiprocessing.process"].ORIGINAL_DIR = os.getcwd()  # type: ignore[attr-defined]
    code = 0
    try:
        _run_as_main(script)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - what the interpreter prints for an uncaught exception
        traceback.print_exc()
        code = 1
    try:
        # the interpreter waits for non-daemon threads at exit
        threading._shutdown()  # type: ignore[attr-defined] # noqa: SLF001
        atexit._run_exitfuncs()  # noqa: SLF001
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    return code


def _forget_process_caches() -> None:
    """What the server's modules worked out from its own process and would hand on stale: `tempfile` caches the
    temporary directory (the server's, not the run's TMPDIR) and `random` was seeded once for every fork."""
    import random
    import tempfile

    tempfile.tempdir = None  # recomputed from this environment's TMPDIR on first use
    random.seed()  # from the OS, as a fresh interpreter does


def _forget_shadowed_modules(directory: str) -> None:
    """In a cold start a file of the run directory (`yaml.py`, `runner/`) shadows the module of that name, which the
    server may have imported already: forget those, so the run's own file is what `import` finds."""
    names = set()
    for entry in os.listdir(directory):
        stem, suffix = os.path.splitext(entry)
        if suffix in (".py", ".pyc", ".so") or (not suffix and os.path.isdir(os.path.join(directory, entry))):
            names.add(stem.split(".")[0])
    for name in [m for m in sys.modules if m.split(".")[0] in names and m not in sys.builtin_module_names]:
        del sys.modules[name]


def _exit_code(value) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def become(request: dict, fds: list[int], base_path: list[str]) -> None:
    code = EXIT_CHILD_FAILED
    try:
        os.setsid()
        for number in range(1, 65):
            _default_signal(number)
        _arrange_descriptors(request, fds)
        env = {**request.get("env", {}), **_read_secret_environment(request, fds)}
        spec = request.get("confine")
        if spec is not None:
            libc = ctypes.CDLL(None, use_errno=True)
            confine.apply_limits(spec.get("limits", {}))
            if spec.get("join"):
                confine.join(libc, spec["join"])  # from here on, the child inside the run's sandbox
            if spec.get("isolate_network"):
                confine.isolate_network(libc)
            if spec.get("reveal"):
                confine.reveal_paths(libc, spec["reveal"])
            if spec.get("uid") is not None:
                confine.drop_privileges(spec["uid"], spec["gid"])
            libc.prctl(confine.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE back to 1, as an exec would leave it
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(env)
        _forget_process_caches()
        argv = [str(part) for part in request["argv"]]
        if request.get("python"):
            _fresh_streams(env)
            code = _run_python(argv[1], argv[2:], base_path)
        else:
            os.execvpe(argv[0], argv, env)
    except BaseException as exc:  # noqa: BLE001 - reported on the run's stderr, then the child ends
        try:
            os.write(2, f"warm runner: cannot start the process: {exc!r}\n".encode())
        except OSError:
            pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code)


def _default_signal(number: int) -> None:
    import signal

    if number in (signal.SIGKILL, signal.SIGSTOP):
        return
    try:
        # SIGPIPE and SIGXFSZ stay ignored and SIGINT raises KeyboardInterrupt, as in a fresh interpreter (and
        # as confine.py, a Python program, leaves them to what it execs in a cold start).
        kept: dict[int, Any] = {signal.SIGPIPE: signal.SIG_IGN, signal.SIGXFSZ: signal.SIG_IGN,
                                signal.SIGINT: signal.default_int_handler}
        handler = kept.get(number, signal.SIG_DFL)
        signal.signal(number, handler)
    except (OSError, ValueError):
        pass


def become_runner(run_main: Callable[[list[str]], int], arguments: list[str], log_fd: int, warm_socket: str,
                  keep: set[int] | frozenset = frozenset()) -> None:
    """A runner (`python -m runner ARGS`, whose `main` the server passes as `run_main`: the entry point is the
    server's to know) in this fork: its own session, stdout/stderr to `log_fd`, its harness processes forked from
    this same server. Its payload is read only now, so no secret ever reaches the server."""
    code = 1
    try:
        os.setsid()
        for number in range(1, 65):
            _default_signal(number)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        for name in os.listdir("/proc/self/fd"):
            if int(name) > 2 and int(name) not in keep:  # kept: those of the sandbox built ahead for this run
                try:
                    os.close(int(name))
                except OSError:
                    pass
        _fresh_streams(dict(os.environ))
        _leave_pid_file(arguments)
        _forget_process_caches()
        # Loaded in the server already (runner/warm.py main); named here, in the forked runner, like its entry point.
        from runner.confinement.sandbox import discard_offer

        try:
            code = run_main(["--warm", warm_socket, *arguments])
        finally:
            discard_offer()  # a sandbox built ahead that this run could not use
    except BaseException:  # noqa: BLE001 - the runner's log says why; the backend sees no result
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code)


def _leave_pid_file(arguments: list[str]) -> None:
    """`runner.pid` beside the result file: pid and start time, by which the local backend finds this runner again
    (a forked runner's command line is its server's)."""
    if "--result" not in arguments:
        return
    directory = os.path.dirname(os.path.abspath(arguments[arguments.index("--result") + 1]))
    with open("/proc/self/stat", "rb") as handle:
        started = handle.read().rsplit(b")", 1)[1].split()[19].decode()
    temporary = os.path.join(directory, ".runner.pid")
    with open(temporary, "w") as handle:
        handle.write(f"{os.getpid()} {started}\n")
    os.replace(temporary, os.path.join(directory, "runner.pid"))
