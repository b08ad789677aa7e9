"""Host shapes the security tests run the platform in: an ordinary user, and a host that cannot build the sandbox."""

from __future__ import annotations

import functools
import pwd
import subprocess
import sys
from pathlib import Path

ORDINARY_USER = "kbuser"

# A host that cannot build the sandbox: not root (a user namespace of its own, uid 4242 inside), and no new user
# namespaces (the refusal a container runtime's default seccomp profile makes; tests/support/no_user_namespaces.py).
CANNOT_ISOLATE = ["unshare", "--user", "--map-user=4242", "--map-group=4242", sys.executable,
                  str(Path(__file__).with_name("no_user_namespaces.py"))]


def ordinary_user() -> pwd.struct_passwd:
    """The account of an ordinary user, made on first use."""
    try:
        return pwd.getpwnam(ORDINARY_USER)
    except KeyError:
        subprocess.run(["useradd", "-m", ORDINARY_USER], check=True, capture_output=True)
        return pwd.getpwnam(ORDINARY_USER)


@functools.cache
def can_simulate_a_host_without_isolation() -> bool:
    try:
        return subprocess.run([*CANNOT_ISOLATE, "true"], capture_output=True, timeout=30).returncode == 0
    except OSError:
        return False
