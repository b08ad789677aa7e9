"""The platform rides out a restart of its NATS server: services reconnect, durable consumers resume."""

from __future__ import annotations

import time

import pytest

from problems import PROBLEMS_ROOT
from tests.support.events import archived

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()


def test_a_nats_restart_loses_nothing(nats_server, database_url, tmp_path):
    from tests.support.platform import Platform

    platform = Platform(nats_server.url, database_url, tmp_path)
    platform.start()
    try:
        platform.load_bundled_problems()
        cli = platform.register("6001", "gina")
        accepted = platform.submit(cli, "identity_py", "cpu", "test", CODE)
        assert accepted.status_code == 202, accepted.text
        first = accepted.json()["details"]["id"]

        nats_server.restart()  # while the first submission is in flight

        platform.wait_healthy()
        second = platform.submit(cli, "identity_py", "cpu", "test", CODE)
        assert second.status_code == 202, second.text
        for submission_id in (first, second.json()["details"]["id"]):
            assert platform.wait_done(cli, submission_id)["job"]["status"] == "succeeded"
            assert len(archived(database_url, "SubmissionFinished", str(submission_id))) == 1
    finally:
        platform.stop()


def _submit_until_accepted(platform, cli: str, timeout: float = 30) -> int:
    """While services reconnect a submit may be refused (503); a client retries, and so does this."""
    deadline = time.monotonic() + timeout
    while True:
        response = platform.submit(cli, "identity_py", "cpu", "test", CODE)
        if response.status_code == 202 or time.monotonic() > deadline:
            assert response.status_code == 202, response.text
            return response.json()["details"]["id"]
        assert response.status_code in (500, 503), response.text
        time.sleep(0.2)


@pytest.mark.slow  # flaky: see the note on the spine issue; run with -m slow while it is being fixed
def test_a_postgres_restart_loses_nothing(postgres_server, nats_url, database_url, tmp_path):
    from tests.support.platform import Platform

    platform = Platform(nats_url, database_url, tmp_path)
    platform.start()
    try:
        platform.load_bundled_problems()
        cli = platform.register("6002", "hugo")
        accepted = platform.submit(cli, "identity_py", "cpu", "test", CODE)
        assert accepted.status_code == 202, accepted.text
        first = accepted.json()["details"]["id"]

        postgres_server.restart()  # every service loses its connections while the first submission runs

        platform.wait_healthy()
        second = _submit_until_accepted(platform, cli)
        for submission_id in (first, second):
            assert platform.wait_done(cli, submission_id)["job"]["status"] == "succeeded"
            assert len(archived(database_url, "SubmissionFinished", str(submission_id))) == 1
    finally:
        platform.stop()
