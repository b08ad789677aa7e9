"""`python no_user_namespaces.py PROGRAM [ARGS...]`: run PROGRAM where no new user namespace can be made.

The shape of a host that cannot build the run sandbox: user namespaces turned off by sysctl, or a container whose
runtime's default seccomp profile refuses them. The filter is the sandbox's own (runner/confinement/seccomp.py) reduced
to that one refusal, installed with no-new-privileges (needed without CAP_SYS_ADMIN, and inherited by PROGRAM)."""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

# The repository in place of this script's folder, whose platform.py would shadow the standard library's.
sys.path[0] = str(Path(__file__).resolve().parents[2])

from runner.confinement.confine import PR_SET_NO_NEW_PRIVS, install_seccomp  # noqa: E402
from runner.confinement.seccomp import build_filter  # noqa: E402


def main(argv: list[str]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot set no-new-privileges")
    install_seccomp(libc, build_filter(user_namespaces_only=True))
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
