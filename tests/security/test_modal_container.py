"""A Modal container runs many submissions in one warm process: two runs through one container's class see nothing
of each other (files, run directories, daemons), whether the container may create namespaces or not. The runs go
through deploy/modal/app.py in a private mount namespace, so that the container's sweep of /tmp touches nothing of
this host's."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.security.remote_payloads import payload_running, stdout_of
from tests.support.fakes.host import REPO

LEAVE_TRACES = """
import os, sys
MARK = "{mark}"
print("RUNDIR", os.getcwd())
for directory in ("/tmp", "/var/tmp", "/dev/shm"):
    try:
        with open(os.path.join(directory, MARK), "w") as out:
            out.write("run 1 was here")
    except OSError as exc:
        print("cannot leave a file in", directory, exc)
child = os.fork()
if child == 0:  # a daemon: its own session, no inherited descriptors, the mark in its command line and environment
    os.setsid()
    if os.fork() == 0:
        os.closerange(0, 65536)
        os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", MARK],
                  dict(os.environ, RUN_ONE_SECRET=MARK))
    os._exit(0)
os.waitpid(child, 0)
"""

LOOK_FOR_TRACES = """
import json, os
MARK, EARLIER = "{mark}", {earlier!r}
found = []
for directory in ("/tmp", "/var/tmp", "/dev/shm"):
    if os.path.exists(os.path.join(directory, MARK)):
        found.append("file in " + directory)
if os.path.exists(EARLIER):
    found.append("run 1's directory " + EARLIER)
for pid in os.listdir("/proc"):
    for part in ("cmdline", "environ"):
        try:
            if MARK.encode() in open(f"/proc/{{pid}}/{{part}}", "rb").read():
                found.append(f"process {{pid}} ({{part}})")
        except OSError:
            pass
print("FOUND", json.dumps(found))
"""


def two_runs_in_one_container() -> None:
    """Run in a private mount namespace by the test below: two runs through one warm container, then its exit."""
    import importlib.util

    from modal._partial_function import _find_callables_for_obj, _PartialFunctionFlags

    spec = importlib.util.spec_from_file_location("kernelbot_modal_app", REPO / "deploy" / "modal" / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    claims: dict[str, str] = {}
    app.launches = type("Claims", (), {"put": lambda self, k, v, skip_if_exists=False: claims.setdefault(k, v) == v,
                                       "get": lambda self, k: claims.get(k)})()
    app.modal.current_function_call_id = lambda: "fc-" + str(len(claims))
    container = app.WarmRunner()
    hooks = {flag: _find_callables_for_obj(container, flag) for flag in
             (_PartialFunctionFlags.ENTER_POST_SNAPSHOT, _PartialFunctionFlags.CALLABLE_INTERFACE,
              _PartialFunctionFlags.EXIT)}
    for hook in hooks[_PartialFunctionFlags.ENTER_POST_SNAPSHOT].values():
        hook()
    mark = "kb-mark-" + uuid.uuid4().hex
    run = hooks[_PartialFunctionFlags.CALLABLE_INTERFACE]["run"]
    try:
        first = run(payload_running(LEAVE_TRACES.format(mark=mark), "md-1").model_dump(mode="json"), "md-1.1")
        earlier = next(line.split(" ", 1)[1] for line in stdout_of(first).splitlines() if line.startswith("RUNDIR"))
        second = run(payload_running(LOOK_FOR_TRACES.format(mark=mark, earlier=earlier), "md-2")
                     .model_dump(mode="json"), "md-2.1")
    finally:
        for hook in hooks[_PartialFunctionFlags.EXIT].values():
            hook()
    found = next(json.loads(line[6:]) for line in stdout_of(second).splitlines() if line.startswith("FOUND "))
    left = [entry for entry in os.listdir("/tmp") if entry.startswith("kernelbot-") and entry != "kernelbot-sandbox-uids"]
    print(json.dumps({"found": found, "left": left, "isolation": [first.get("isolation"), second.get("isolation")],
                      "alive": [pid for pid in os.listdir("/proc") if pid.isdigit() and _has_mark(pid, mark)]}))


def _has_mark(pid: str, mark: str) -> bool:
    try:
        return mark.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


# The container as Modal may give it: root that may create namespaces (the sandbox's full level), or root without
# CAP_SYS_ADMIN (a container that may not: the sandbox confines by limits only, every run as the same root).
CONTAINERS = {"namespaces allowed": "", "no CAP_SYS_ADMIN": "setpriv --inh-caps=-sys_admin --bounding-set=-sys_admin "}


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"),
                    reason="needs root to give the container a private /tmp")
@pytest.mark.parametrize("container", CONTAINERS)
def test_modal_two_runs_in_one_warm_container_see_nothing_of_each_other(container):
    # The container's own /tmp; a checkout or virtual environment that lives under the host's /tmp (CI's clone, say)
    # is bound back into it, through /mnt, so the container can still start Python.
    under_tmp = sorted(path for path in {str(REPO), sys.prefix} if path.startswith("/tmp/"))
    keep = [path for path in under_tmp if not any(path.startswith(other + "/") for other in under_tmp)]
    bind_back = "".join(f" && mkdir -p {shlex.quote(path)} && mount --bind {shlex.quote('/mnt' + path[len('/tmp'):])}"
                        f" {shlex.quote(path)}" for path in keep)
    script = ("mount --bind /tmp /mnt && mount -t tmpfs tmpfs /tmp" + bind_back + " && umount -l /mnt && "
              "mount -t tmpfs tmpfs /var/tmp && mount -t tmpfs tmpfs /dev/shm && exec "
              f"{CONTAINERS[container]}{shlex.quote(sys.executable)} -c "
              "'from tests.security.test_modal_container import two_runs_in_one_container as t; t()'")
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["found"] == [], report
    assert report["alive"] == [], report
    assert report["left"] == [], report
