"""The dedicated uid of each run when the runner is root (61000-61999): claimed for the run's life, and everything
of it killed and removed at the end. The full sandbox runs user code as this uid outside its user namespace; the
limits-only fallback relies on it (with the cleanup of world-writable places) to keep runs apart."""

from __future__ import annotations

import fcntl
import os
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

UID_RANGE = range(61_000, 62_000)  # dedicated sandbox uids; none needs a passwd entry
LOCK_DIR = Path(tempfile.gettempdir()) / "kernelbot-sandbox-uids"
SHARED_WRITABLE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


def claim_uid():
    """A sandbox uid no other run on this host holds, kept by an flock for the run's life."""
    LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
    candidates = list(UID_RANGE)
    random.shuffle(candidates)
    for uid in candidates:
        handle = open(LOCK_DIR / f"{uid}.lock", "w")  # noqa: SIM115 - held until the run ends
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        kill_uid(uid)  # leftovers of a crashed runner
        return uid, handle
    raise RuntimeError("no free sandbox uid")


def kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid`: also those that left the process group (setsid) to outlive the run."""
    subprocess.run(["kill", "-KILL", "-1"], user=uid, group=uid, extra_groups=[], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def remove_files_of(uid: int) -> None:
    """Whatever the uid left in world-writable places, so nothing persists into another submission's run."""
    for directory in SHARED_WRITABLE_DIRS:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def tasks_of_uid(uid: int) -> int:
    """Live processes and threads owned by `uid` (what RLIMIT_NPROC counts)."""
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1 ").split()[0]) == uid and not fields.get("State", "").strip().startswith("Z"):
            count += int(fields.get("Threads", "1").strip())
    return count
