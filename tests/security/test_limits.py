"""Limits and outages: what one client can hold, and what callers are told when Postgres or NATS blink.

Real gateway subprocesses, real Postgres (the session's embedded server, stopped and started here) and real NATS.
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import httpx
import pytest
from faststream.nats import NatsRouter
from prometheus_client import REGISTRY

from problems import PROBLEMS_ROOT
from schemas.streams import DEAD_LETTERS
from services.kit.bus import declare_streams, make_broker
from services.kit.deadletter import DeadLetterMiddleware, current_message
from services.kit.embedded import free_port
from services.kit.runtime import durable_consumer
from tests.support.events import archived
from tests.support.in_process import InProcessPlatform
from tests.support.platform import Platform

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()


def _retry_after(response: httpx.Response) -> int:
    assert response.headers.get("Retry-After", "").isdigit(), response.headers
    return int(response.headers["Retry-After"])


# ------------------------------------------------------------------------------------------------ rate limits


def test_one_address_cannot_fill_the_pending_registrations(nats_url, database_url, tmp_path):
    gateway = InProcessPlatform(nats_url, database_url, tmp_path, extra_env={"KB_AUTH_INIT_RATE": "5/minute"})
    gateway.start("gateway")
    try:
        # a made-up X-Forwarded-For changes nothing: no proxy is trusted
        answers = [gateway.http.get("/auth/init", params={"provider": "github"},
                                    headers={"X-Forwarded-For": f"198.51.100.{i}"}) for i in range(8)]
        assert [a.status_code for a in answers] == [200] * 5 + [429] * 3
        refused = answers[-1]
        assert refused.json()["detail"].startswith("Too many requests")
        assert 0 < _retry_after(refused) <= 60
    finally:
        gateway.stop()


def test_a_user_cannot_flood_submissions(nats_url, database_url, tmp_path):
    platform = InProcessPlatform(nats_url, database_url, tmp_path,
                                 extra_env={"KB_SUBMIT_RATE": "3/minute", "KB_PROJECTION_WAIT_S": "0.2"})
    platform.start("ledger", "gateway")
    try:
        platform.load_bundled_problems()
        cli = platform.register("7101", "flo")
        other = platform.register("7102", "ida")
        codes = [platform.submit(cli, "identity_py", "cpu", "test", CODE).status_code for _ in range(5)]
        assert codes == [202, 202, 202, 429, 429]
        refused = platform.submit(cli, "identity_py", "cpu", "test", CODE)
        assert "submissions" in refused.json()["detail"] and _retry_after(refused) > 0
        # the floor is per user: someone else still submits
        assert platform.submit(other, "identity_py", "cpu", "test", CODE).status_code == 202
        assert len(archived(database_url, "SubmissionReceived")) == 4
    finally:
        platform.stop()


def test_a_user_cannot_hold_unbounded_streams(nats_url, database_url, tmp_path):
    # no dispatcher: every stream stays open, waiting for a run that never starts
    platform = InProcessPlatform(nats_url, database_url, tmp_path,
                                 extra_env={"KB_STREAMS_PER_USER": "2", "KB_STREAMS_TOTAL": "3",
                                            "KB_PROJECTION_WAIT_S": "0.2"})
    platform.start("ledger", "gateway")
    try:
        platform.load_bundled_problems()
        alice = platform.register("7201", "alice")
        bob = platform.register("7202", "bob")
        with httpx.Client(base_url=platform.url, timeout=30) as http:
            opened = []

            def open_stream(cli: str) -> httpx.Response:
                request = http.build_request("POST", "/identity_py/cpu/test", headers={"X-Popcorn-Cli-Id": cli},
                                             files={"file": ("submission.py", CODE.encode())})
                response = http.send(request, stream=True)
                opened.append(response)
                return response

            try:
                assert open_stream(alice).status_code == 200
                assert open_stream(alice).status_code == 200
                third = open_stream(alice)
                assert third.status_code == 429  # an open stream would never end: no read before this
                third.read()
                assert "streams" in third.json()["detail"] and _retry_after(third) > 0
                assert open_stream(bob).status_code == 200
                full = open_stream(bob)  # four would pass the total of three
                assert full.status_code == 429
                # a stream that ends gives its place back
                opened[0].close()
                platform.wait_for(lambda: open_stream(alice).status_code == 200, "a freed stream slot", 10)
            finally:
                for response in opened:
                    response.close()
        # a refused stream recorded no submission
        assert len(archived(database_url, "SubmissionReceived")) == 4
    finally:
        platform.stop()


# ---------------------------------------------------------------------------------------------------- outages


# The outage tests keep their services in processes of their own: what they show is a process that lives through
# NATS or Postgres going away, and its stop during one is that process's own business, as in a deployment.
@pytest.mark.slow
def test_an_outage_answers_503_and_liveness_holds(postgres_server, nats_server, database_url, tmp_path):
    port = free_port()
    ledger_status = f"http://127.0.0.1:{port}"  # a consumer service's probes, on its metrics port
    platform = Platform(nats_server.url, database_url, tmp_path, extra_env={"KB_METRICS_PORT": str(port)})
    platform.start("ledger", "gateway")
    try:
        platform.load_bundled_problems()
        cli = platform.register("7301", "otto")
        platform.wait_for(lambda: httpx.get(f"{ledger_status}/ready").status_code == 200, "the ledger ready", 10)
        postgres_server.stop()
        try:
            for base in (platform.url, ledger_status):  # each process is alive: liveness must not restart it
                health = httpx.get(f"{base}/health")
                assert (health.status_code, health.json()) == (200, {"status": "ok"}), base
                assert httpx.get(f"{base}/ready", timeout=10).status_code == 503, base
            read = platform.http.get("/user/submissions", headers={"X-Popcorn-Cli-Id": cli})
            assert read.status_code == 503, read.text
            assert read.json() == {"detail": "Backend unavailable"} and _retry_after(read) > 0
            submit = platform.submit(cli, "identity_py", "cpu", "test", CODE)
            assert submit.status_code == 503, submit.text
            assert _retry_after(submit) > 0
        finally:
            postgres_server.start()
        platform.wait_for(lambda: platform.http.get("/ready").status_code == 200, "ready again", 30)

        nats_server.stop()
        try:
            assert platform.http.get("/health").status_code == 200
            submit = platform.submit(cli, "identity_py", "cpu", "test", CODE)
            assert (submit.status_code, submit.json()) == (503, {"detail": "Backend unavailable"})
            assert _retry_after(submit) > 0
        finally:
            nats_server.start()
    finally:
        platform.stop()


@pytest.mark.slow
def test_postgres_blinking_after_the_publish_never_invites_a_second_submission(
        postgres_server, nats_url, database_url, tmp_path):
    # no dispatcher yet: the submit waits its whole projection wait, and Postgres goes away meanwhile
    platform = Platform(nats_url, database_url, tmp_path, extra_env={"KB_PROJECTION_WAIT_S": "6"})
    platform.start("ledger", "gateway")
    try:
        platform.load_bundled_problems()
        cli = platform.register("7401", "pia")
        answer: list[httpx.Response] = []
        submitting = threading.Thread(
            target=lambda: answer.append(platform.submit(cli, "identity_py", "cpu", "test", CODE)))
        submitting.start()
        # the ledger projected it: the publish was acknowledged and the gateway is waiting for a decision
        platform.wait_for(lambda: len(archived(database_url, "SubmissionReceived")) == 1, "the publish", 10)
        postgres_server.stop()
        try:
            submitting.join(30)
            response = answer[0]
            assert response.status_code == 202, response.text
            submission_id = response.json()["details"]["id"]
        finally:
            postgres_server.start()
        platform.start("dispatcher", "scorer")
        assert platform.wait_done(cli, submission_id)["job"]["status"] == "succeeded"
        assert len(archived(database_url, "SubmissionReceived")) == 1
    finally:
        platform.stop()


# ------------------------------------------------------------------------------------------ consumer failures


def _counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(f"{name}_total", labels) or 0.0


async def test_a_handler_bug_is_retried_and_alerted_never_dead_lettered_at_once(nats_url, caplog):
    durable = f"limits-{uuid.uuid4().hex[:8]}"
    subject = f"evt.limits.{durable}"
    deliveries: list[str] = []
    broker = make_broker(nats_url, middlewares=(DeadLetterMiddleware,))
    router = NatsRouter()

    @router.subscriber(subject, **durable_consumer(durable, workers=1))
    async def handle(body: str) -> None:
        deliveries.append(body)
        if len(deliveries) == 1:
            raise KeyError("a row the handler expected was not there yet")
        await current_message().ack()

    broker.include_router(router)
    await broker.connect()
    await declare_streams(broker)
    await broker.start()
    try:
        js = broker.connection.jetstream()
        dead_before = (await js.stream_info(DEAD_LETTERS.name)).state.messages
        await broker.publish("a valid event", subject, stream="EVENTS", headers={"Nats-Msg-Id": durable})
        for _ in range(500):
            if len(deliveries) >= 2:
                break
            await asyncio.sleep(0.02)
        assert deliveries == ["a valid event", "a valid event"], "the event was not delivered again"
        assert (await js.stream_info(DEAD_LETTERS.name)).state.messages == dead_before
        assert _counter("kb_handler_errors", consumer=durable, subject=subject, error="KeyError") == 1
        alerts = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert any(f"handler error on event {durable}" in line for line in alerts), alerts
    finally:
        await broker.stop()
