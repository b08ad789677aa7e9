"""A host that cannot isolate runs fails closed: its results do not reach a leaderboard outside development mode.

The attack: on a runner that confines a submission by resource limits only (not root, or no namespaces), user code
shares the runner's uid and network. It can reach the platform's services, outlive the run, or touch the files the
runner reports from; a score measured there cannot be trusted. Before isolation levels existed, such a runner fell
back silently and its scores ranked like any other.

Here the dispatcher, and so every runner it starts, runs in a user namespace of its own where it is not root: the real
sandbox cannot give a run a uid and namespaces of its own, exactly as on a host without them. Everything else is real:
gateway, NATS, dispatcher, local runner, scorer, ledger.
"""

from __future__ import annotations

import socket
import socketserver
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qs, urlsplit

import pytest

from problems import PROBLEMS_ROOT
from tests.support.hosts import CANNOT_ISOLATE, can_simulate_a_host_without_isolation
from tests.support.in_process import InProcessPlatform
from tests.support.platform import Platform

VECTORADD = PROBLEMS_ROOT / "examples" / "vectoradd_py"


pytestmark = [pytest.mark.slow, pytest.mark.skipif(not can_simulate_a_host_without_isolation(), reason="needs `unshare --user` and seccomp")]


def _copy(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class _ToUnixSocket(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        with socket.socket(socket.AF_UNIX) as upstream:
            upstream.connect(self.server.unix_path)  # type: ignore[attr-defined]
            back = threading.Thread(target=_copy, args=(upstream, self.request), daemon=True)
            back.start()
            _copy(self.request, upstream)
            back.join()


@contextmanager
def _over_tcp(database_url: str) -> Iterator[str]:
    """The database as a process that is not root reaches it: the embedded Postgres listens on a unix socket in a
    directory only its own user may enter, so it is forwarded from a local TCP port (an external one is used as
    it is)."""
    parts = urlsplit(database_url)
    directory = parse_qs(parts.query).get("host", [""])[0]
    if not directory.startswith("/"):
        yield database_url
        return
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _ToUnixSocket)
    server.daemon_threads = True
    server.unix_path = f"{directory}/.s.PGSQL.{parse_qs(parts.query)['port'][0]}"  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"postgresql://{parts.username}@127.0.0.1:{server.server_address[1]}{parts.path}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def _platform(nats_url: str, database_url: str, tmp_path, development: bool) -> Iterator[Platform]:
    platform = InProcessPlatform(nats_url, database_url, tmp_path,
                        extra_env={"KB_DEVELOPMENT_MODE": "true" if development else "false"})
    with _over_tcp(database_url) as reachable:
        try:
            platform.start("ledger", "scorer", "gateway")
            platform.spawn("dispatcher", [*CANNOT_ISOLATE, sys.executable, "-m", "services.cli", "serve", "dispatcher"],
                           env={**platform.env(), "KB_DATABASE_URL": reachable})
            yield platform
        finally:
            platform.stop()


def _ranked_submission(platform: Platform) -> tuple[int, dict]:
    platform.load_bundled_problems()
    mallory = platform.register("6601", "mallory")
    code = (VECTORADD / "submission.py").read_text()
    submission_id = platform.submit(mallory, "vectoradd_py", "cpu", "leaderboard", code).json()["details"]["id"]
    return submission_id, platform.wait_done(mallory, submission_id, timeout=180)


def test_a_run_confined_by_limits_only_is_judged_but_never_ranked(nats_url, database_url, tmp_path):
    with _platform(nats_url, database_url, tmp_path, development=False) as platform:
        submission_id, view = _ranked_submission(platform)
        assert view["job"]["status"] == "failed", view["job"]
        error = view["job"]["error"]
        assert error.startswith("not ranked on cpu: this runner could not isolate the run (limits-only: "), error
        assert error.endswith("submission will not appear on the leaderboard")
        # the runs themselves passed: the user learns that the code is right and why it does not rank
        assert all(run["passed"] for run in view["runs"]), view["runs"]
        assert platform.ranking("vectoradd_py", "cpu") == []


def test_development_mode_ranks_it(nats_url, database_url, tmp_path):
    with _platform(nats_url, database_url, tmp_path, development=True) as platform:
        submission_id, view = _ranked_submission(platform)
        assert view["job"] == {"status": "succeeded", "error": None,
                               "last_heartbeat": view["job"]["last_heartbeat"]}
        ranking = platform.ranking("vectoradd_py", "cpu")
        assert [(r["rank"], r["submission_id"]) for r in ranking] == [(1, submission_id)]
