"""The platform rides out a restart of its NATS server or of its Postgres: services reconnect, durable consumers
resume, and a service still applying migrations when Postgres goes away waits for it (services/kit/db.py)."""

from __future__ import annotations

import pytest

from problems import PROBLEMS_ROOT
from tests.support.events import archived
from tests.support.platform import Platform

pytestmark = pytest.mark.slow

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()


def test_a_nats_restart_loses_nothing(nats_server, database_url, tmp_path):

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


def test_a_postgres_restart_loses_nothing(postgres_server, nats_url, database_url, tmp_path):

    platform = Platform(nats_url, database_url, tmp_path)
    platform.start()
    try:
        platform.load_bundled_problems()
        cli = platform.register("6002", "hugo")
        accepted = platform.submit(cli, "identity_py", "cpu", "test", CODE)
        assert accepted.status_code == 202, accepted.text
        first = accepted.json()["details"]["id"]

        postgres_server.restart()  # every service loses its connections while the first submission runs

        platform.wait_healthy()  # /ready: the gateway's pool answers again
        second = platform.submit(cli, "identity_py", "cpu", "test", CODE)
        assert second.status_code == 202, second.text
        for submission_id in (first, second.json()["details"]["id"]):
            assert platform.wait_done(cli, submission_id)["job"]["status"] == "succeeded"
            assert len(archived(database_url, "SubmissionFinished", str(submission_id))) == 1
    finally:
        platform.stop()
