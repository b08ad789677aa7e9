"""Issue #21, through the path a user takes: `kernelbot up` run as an ordinary user, and a test-mode submission.

The finding: a submission found `KB_DATABASE_URL` in a service's environment, connected to Postgres as its superuser
and counted the users, and wrote a file outside its run directory. Here the whole `kernelbot up` (its own embedded
NATS and Postgres, ledger, dispatcher with the local runner, scorer, gateway) runs as `kbuser`, the way a person
without root starts it; the attack arrives through the gateway's HTTP API as that person's own test-mode submission
to vectoradd_py. At import it scans every /proc/*/environ for the platform's URLs, connects to what they name and to
the addresses the test knows (NATS's TCP port, Postgres's unix socket), queries Postgres when it gets through, and
writes a marker file to places outside its run that the test checks on the host; it prints what it achieved and
then answers correctly, so the run completes and its stdout comes back in the report.

With the run sandbox (runner/confinement/bwrap.py, an unprivileged user namespace as an ordinary user) the attack finds
nothing. The second test is the control: the same `kernelbot up` where no user namespace can be made
(tests/support/no_user_namespaces.py), so runs are confined by limits only, and the same probe sees and reaches
everything. It proves the probe works, so the first test cannot pass for want of looking.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

import runner
from problems import PROBLEMS_ROOT
from runner.confinement.sandbox import closed_ancestors, interpreter_paths, sandbox_level
from services.kit.embedded import free_port
from tests.support.events import archived
from tests.support.hosts import ORDINARY_USER, ordinary_user

REPO = Path(runner.__file__).resolve().parents[1]
CONFINE = REPO / "runner" / "confinement" / "confine.py"
NO_USER_NAMESPACES = REPO / "tests" / "support" / "no_user_namespaces.py"
USER = ORDINARY_USER
VECTORADD = PROBLEMS_ROOT / "examples" / "vectoradd_py"
REPORT = "ATTACK-REPORT "

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.geteuid() != 0, reason="creates and becomes an ordinary user: needs root")]

PROBE = '''
import glob, json, os, socket
from urllib.parse import parse_qs, unquote, urlsplit

KNOWN = json.loads(__KNOWN__)


def _probe():
    found = {"environ": [], "connected": [], "postgres": [], "wrote": []}
    urls = set()
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            entries = open(path, "rb").read().split(b"\\0")
        except OSError:
            continue
        for entry in entries:
            name, _, value = entry.decode(errors="replace").partition("=")
            if name in ("KB_DATABASE_URL", "KB_NATS_URL"):
                found["environ"].append(path + " " + name)
                urls.add(value)
    targets = [("tcp", "127.0.0.1", port) for port in KNOWN["tcp"]] + [("unix", p) for p in KNOWN["unix"]]
    for url in sorted(urls):
        parts, query = urlsplit(url), parse_qs(urlsplit(url).query)
        if parts.hostname:
            targets.append(("tcp", parts.hostname, parts.port or (4222 if url.startswith("nats") else 5432)))
        if "host" in query:
            targets.append(("unix", unquote(query["host"][0]) + "/.s.PGSQL." + query.get("port", ["5432"])[0]))
    for target in targets:
        family = socket.AF_UNIX if target[0] == "unix" else socket.AF_INET
        try:
            with socket.socket(family) as conn:
                conn.settimeout(2)
                conn.connect(target[1] if target[0] == "unix" else target[1:])
            found["connected"].append(":".join(map(str, target)))
        except OSError:
            pass
    for dsn in sorted(u for u in urls if u.startswith("postgres")) + KNOWN["dsn"]:
        try:
            import psycopg

            with psycopg.connect(dsn, connect_timeout=3) as db:
                found["postgres"].append(db.execute(
                    "SELECT current_user, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user), "
                    "(SELECT count(*) FROM users)").fetchone())
        except Exception:
            pass
    for path in KNOWN["write"]:
        try:
            with open(path, "w") as out:
                out.write("escaped")
            found["wrote"].append(path)
        except OSError:
            pass
    print(__REPORT__ + json.dumps(found, default=str), flush=True)


_probe()


def custom_kernel(data):
    a, b = data
    return a + b
'''



class Up:
    """`kernelbot up` started as kbuser, with a data directory of its own."""

    def __init__(self, sandbox: bool) -> None:
        self.account = ordinary_user()
        self.home = Path(self.account.pw_dir)
        self.place = Path(tempfile.mkdtemp(prefix="kb-up-as-user-"))  # not under pytest's 0700 tmp: kbuser enters
        os.chmod(self.place, 0o755)
        os.chown(self.place, self.account.pw_uid, self.account.pw_gid)
        self.data_dir = self.place / "data"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.http = httpx.Client(base_url=self.url, timeout=30)
        command = [sys.executable, "-m", "services.cli", "up", "--data-dir", str(self.data_dir), "--port",
                   str(self.port)]
        if not sandbox:
            command = [sys.executable, str(NO_USER_NAMESPACES), *command]
        # The interpreter sits under a closed /root: reveal it, as the runner does for its own uids, then drop to
        # kbuser (runner/confinement/confine.py); nothing else of /root is visible.
        spec = {"reveal": closed_ancestors(interpreter_paths()), "uid": self.account.pw_uid,
                "gid": self.account.pw_gid}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO), "HOME": str(self.home),
               "USER": USER, "LOGNAME": USER, "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
        self.log = open(self.place / "up.log", "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen([sys.executable, "-I", "-S", str(CONFINE), json.dumps(spec), "--", *command],
                                        cwd=self.place, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                        start_new_session=True)

    def output(self) -> str:
        logs = [self.place / "up.log", *sorted(self.data_dir.glob("*.log"))]
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs if p.exists())

    def wait_ready(self, timeout: float = 120) -> str:
        """The local user's CLI id, once the gateway knows that user and the bundled boards."""
        deadline = time.monotonic() + timeout
        cli_file = self.data_dir / "cli_id"
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            try:
                if cli_file.exists() and self.http.get("/leaderboards").json():
                    cli_id = cli_file.read_text().strip()
                    if self.http.get("/user/submissions/0", headers={"X-Popcorn-Cli-Id": cli_id}).status_code == 404:
                        return cli_id
            except (httpx.TransportError, ValueError):
                pass
            time.sleep(0.2)
        raise AssertionError(f"kernelbot up did not come up\n{self.output()}")

    def known_addresses(self) -> dict:
        """What the test knows of the running stack, handed to the probe as well: NATS's TCP port (its config)
        and Postgres's socket and superuser DSN (pgserver's postmaster.pid: line 4 the port, line 5 the socket
        directory)."""
        nats_port = next(int(line.split(":")[1]) for line in (self.data_dir / "nats" / "nats.conf").read_text()
                         .splitlines() if line.strip().startswith("port"))
        postmaster = (self.data_dir / "postgres" / "pgdata" / "postmaster.pid").read_text().splitlines()
        pg_port, socket_dir = postmaster[3].strip(), postmaster[4].strip()
        return {"tcp": [nats_port, int(pg_port)], "unix": [f"{socket_dir}/.s.PGSQL.{pg_port}"],
                "dsn": [f"postgresql://postgres@/postgres?host={socket_dir}&port={pg_port}"]}

    def stop(self) -> None:
        self.http.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # `up` stops its services and servers
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()
        shutil.rmtree(self.place, ignore_errors=True)


@contextmanager
def _up(sandbox: bool) -> Iterator[Up]:
    up = Up(sandbox)
    try:
        yield up
    finally:
        up.stop()


def _markers(up: Up) -> list[Path]:
    """Where the probe tries to write, all outside its run: kbuser's home, the host's /tmp, `up`'s data directory."""
    token = uuid.uuid4().hex
    return [up.home / f"escape-{token}", Path("/tmp") / f"escape-{token}", up.data_dir / f"escape-{token}"]


def _attack(up: Up, markers: list[Path]) -> tuple[dict, dict]:
    """The user's own test-mode submission carrying the probe; returns what it reported and the run's result."""
    cli_id = up.wait_ready()
    known = {**up.known_addresses(), "write": [str(m) for m in markers]}
    code = PROBE.replace("__KNOWN__", repr(json.dumps(known))).replace("__REPORT__", repr(REPORT))
    # popcorn-cli's streaming submit: `status` events, then one `result` event with each run's FullResult
    events = []
    with up.http.stream("POST", "/vectoradd_py/cpu/test", headers={"X-Popcorn-Cli-Id": cli_id},
                        files={"file": ("submission.py", code.encode())}, timeout=180) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: "):]))
    final = events[-1]
    assert final["status"] == "success", (final, up.output())
    [result] = final["results"]
    stdout = result["runs"]["test"]["run"]["stdout"]
    assert REPORT in final["reports"][0], final["reports"]  # the report the user reads shows it too
    reports = [json.loads(line[len(REPORT):]) for line in stdout.splitlines() if line.startswith(REPORT)]
    assert reports, (final, up.output())
    # How the runner confined the run, as the platform recorded it: the ledger's archive of the run's completion
    # (the stream's view rebuilds the result without it).
    [completed] = archived(known["dsn"][0], "RunCompleted", str(final["submission_id"]))
    return reports[0], completed["result"]


def test_a_submission_to_up_run_as_an_ordinary_user_finds_nothing():
    if sandbox_level()[0] != "full":
        pytest.skip(f"this machine cannot build the run sandbox: {sandbox_level()[1]}")
    with _up(sandbox=True) as up:
        markers = _markers(up)
        try:
            found, result = _attack(up, markers)
            assert (found["environ"], found["connected"], found["postgres"]) == ([], [], []), found
            # /tmp in the sandbox is a tmpfs of its own: the write may succeed there; on the host nothing appears
            assert set(found["wrote"]) <= {str(markers[1])}, found
            assert not [m for m in markers if m.exists()]
            assert result["isolation"] == "full", result
            assert result["success"] and result["runs"]["test"]["run"]["passed"], result
        finally:
            for marker in markers:
                marker.unlink(missing_ok=True)


def test_without_the_sandbox_the_same_probe_finds_the_database():
    """The control: where no user namespace can be made the run is confined by limits only, and the attack of
    issue #21 works again (the services' environment, Postgres as its superuser, a file in kbuser's home)."""
    with _up(sandbox=False) as up:
        markers = _markers(up)
        try:
            found, result = _attack(up, markers)
            assert result["isolation"] == "limits-only", result
            assert any(entry.endswith(" KB_DATABASE_URL") for entry in found["environ"]), found
            assert found["connected"], found
            assert any(user == "postgres" and superuser for user, superuser, _ in found["postgres"]), found
            assert markers[0].exists() and markers[0].stat().st_uid == up.account.pw_uid, found
        finally:
            for marker in markers:
                marker.unlink(missing_ok=True)
