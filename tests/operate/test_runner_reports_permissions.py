"""A runner on a vendor's host reports its results under its own NATS user, which may publish only below its own
name; the dispatcher records a report only for a run on a GPU whose catalogue entry lists that runner. Real NATS
with accounts and permissions, the real platform."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

import nats
import pytest
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from schemas.contracts import FullResult, SystemInfo
from schemas.events import RunCompleted
from schemas.streams import EVENTS, RUNNER_REPORTS, runner_report_id, runner_report_nonce, runner_report_subject
from services.kit.embedded import find_nats_server, free_port
from tests.support.events import archived, dead_letters, query
from tests.support.platform import Platform

pytestmark = pytest.mark.slow

CONFIG = """
port: {port}
max_payload: 8388608
jetstream {{ store_dir: "{store}" }}
accounts {{
  KERNELBOT {{
    jetstream: enabled
    users: [
      {{ user: services, password: services-pw }}
      {{ user: runner-acme, password: acme-pw,
         permissions: {{ publish: {{ allow: ["runner.acme.>"] }}, subscribe: {{ allow: ["_INBOX.>"] }} }} }}
      {{ user: runner-evil, password: evil-pw,
         permissions: {{ publish: {{ allow: ["runner.evil.>"] }}, subscribe: {{ allow: ["_INBOX.>"] }} }} }}
    ]
  }}
}}
"""
# Slow on purpose: the local runner is still working when the vendor's runner reports the same run.
SLOW = "import time\n\n\ndef custom_kernel(data):\n    time.sleep(15)\n    return data.clone()\n"
MARKER = "acme-gpu-7"


@pytest.fixture
def secured_nats(tmp_path):
    port = free_port()
    config = tmp_path / "nats.conf"
    config.write_text(CONFIG.format(port=port, store=tmp_path / "js"))
    server = subprocess.Popen([str(find_nats_server()), "-c", str(config)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    url = f"nats://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            asyncio.run(_close(asyncio.run(nats.connect(f"nats://services:services-pw@127.0.0.1:{port}"))))
            break
        except Exception:  # noqa: BLE001 - not listening yet
            time.sleep(0.1)
    yield url.replace("nats://", "nats://{user}:{password}@")
    server.terminate()
    server.wait(10)


async def _close(client) -> None:
    await client.close()


def _report(url: str, subject: str, stream: str, event: RunCompleted) -> None:
    """Publish as a runner would (runner/container.py: its message ids scoped by its name); raises when the server
    refuses it. Every runner here claims to be `evil` or `acme` by its subject; the id follows the subject."""
    message_id = runner_report_id(subject.split(".")[1], event.message_id, runner_report_nonce()) if subject.startswith("runner.") \
        else event.message_id
    async def send():
        client = await nats.connect(url, max_reconnect_attempts=1)
        try:
            await client.jetstream().publish(subject, event.model_dump_json().encode(),
                                             headers={"Nats-Msg-Id": message_id}, stream=stream, timeout=3)
        finally:
            await client.close()

    asyncio.run(send())


def test_a_runner_reports_only_runs_on_the_gpus_it_serves(secured_nats, database_url, tmp_path):
    services_url = secured_nats.format(user="services", password="services-pw")
    # evil serves a GPU of its own: a report of the cpu run that claims that GPU must still be refused, the
    # reporter being checked against the GPU the run was handed to, not the one its report names
    catalogue = {"gpus": {"cpu": {"backend": "local", "slots": 1, "runners": ["acme"]},
                          "H100": {"backend": "null", "runners": ["evil"]}}}
    platform = Platform(services_url, database_url, tmp_path, local_gpus={"cpu": 1},
                        extra_env={"KB_GPU_CATALOGUE": json.dumps(catalogue)})
    platform.start()
    try:
        platform.load_bundled_problems()
        cli_id = platform.register("4001", "erin")
        submission_id = platform.submit(cli_id, "identity_py", "cpu", "test", SLOW).json()["details"]["id"]
        platform.wait_for(lambda: query(database_url, "SELECT 1 FROM dispatch_runs WHERE submission_id = $1 "
                                                      "AND status = 'launched'", submission_id), "the launch", 60)
        [run] = query(database_url, "SELECT run_id FROM dispatch_runs WHERE submission_id = $1", submission_id)
        forged = RunCompleted(run_id=run["run_id"], submission_id=submission_id, leaderboard="identity_py",
                              gpu="H100", mode="test", backend="forged", correlation_id=str(submission_id),
                              result=FullResult(success=True, error="", system=SystemInfo(hostname="evil")))

        # NATS itself refuses a runner's publish outside its own name: the event subject, another runner's name
        evil = secured_nats.format(user="runner-evil", password="evil-pw")
        for subject, stream in (("evt.run.completed", EVENTS.name),
                                (runner_report_subject("acme", forged.subject), RUNNER_REPORTS.name)):
            with pytest.raises((NatsTimeout, NoRespondersError, TimeoutError)):
                _report(evil, subject, stream, forged)
        # under its own name it gets through to the stream, and the dispatcher dead-letters it with the reason
        _report(evil, runner_report_subject("evil", forged.subject), RUNNER_REPORTS.name, forged)
        platform.wait_for(lambda: dead_letters(services_url), "the forged report to be dead-lettered")
        [(subject, headers, _)] = dead_letters(services_url)
        assert subject == "dlq.dispatcher-runner-reports"
        assert "runner 'evil' may not report run" in headers["Kb-Reason"]

        # the runner the GPU lists reports first: its result is the run's, recorded once, as the dispatcher knows it
        acme = secured_nats.format(user="runner-acme", password="acme-pw")
        honest = forged.model_copy(update={"submission_id": 0, "leaderboard": "", "backend": "container", "gpu": "cpu",
                                           "result": FullResult(success=True, error="",
                                                                system=SystemInfo(hostname=MARKER))})
        _report(acme, runner_report_subject("acme", honest.subject), RUNNER_REPORTS.name, honest)
        try:
            platform.wait_for(lambda: archived(database_url, "RunCompleted", str(submission_id)), "the result")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{platform.log('dispatcher')}\n{dead_letters(services_url)}") from None
        view = platform.wait_done(cli_id, submission_id, timeout=60)
        [recorded] = archived(database_url, "RunCompleted", str(submission_id))
        assert recorded["result"]["system"]["hostname"] == MARKER
        assert (recorded["submission_id"], recorded["leaderboard"], recorded["gpu"], recorded["backend"]) == (
            submission_id, "identity_py", "cpu", "local")
        assert view["done"] is True
        # the local runner's own result, when it comes, finds the run already reported: still one event
        platform.wait_for(lambda: not query(database_url, "SELECT 1 FROM dispatch_runs WHERE status <> 'finished'"),
                          "the run to be finished")
        assert len(archived(database_url, "RunCompleted", str(submission_id))) == 1
    finally:
        platform.stop()
