"""Services a test starts from a helper thread outlive that thread (the chaos bench restarts services from one).

A child's parent-death signal fires when the thread that forked it ends, not the process; every child is forked by
one starter thread that lives as long as the test process (tests/support/children.py)."""

from __future__ import annotations

import threading
import time

import pytest

from problems import PROBLEMS_ROOT
from tests.support.platform import Platform, identity_board

pytestmark = pytest.mark.slow

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()


def test_services_started_by_a_thread_that_ended_still_serve(nats_url, database_url, tmp_path):
    platform = Platform(nats_url, database_url, tmp_path, null_gpus=("null",))
    try:
        helper = threading.Thread(target=platform.start, name="helper")
        helper.start()
        helper.join()
        time.sleep(1.0)  # a parent-death signal arrives at once; a SIGTERMed service is gone well within this
        exited = {name: child.returncode for name, child in platform.children.items() if child.poll() is not None}
        assert exited == {}, {name: platform.log(name) for name in exited}

        platform.add_boards(identity_board("threads", ["null"]))
        cli = platform.register("7101", "tess")
        submission = platform.submit(cli, "threads", "null", "leaderboard", CODE).json()["details"]["id"]
        assert platform.wait_done(cli, submission, timeout=60)["job"]["status"] == "succeeded"
    finally:
        platform.stop()
