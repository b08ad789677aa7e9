"""What a runner identity can make the platform store, and whether it can silence another runner (docs/security.md,
"Runner identities on NATS"): against a real nats-server running the shipped configuration, with the streams as the
services declare them, each runner user of the file acting as the attacker with its own password.

- Filling the account's storage, which EVENTS shares: the streams a runner feeds must be bounded, what it floods
  onto its own report subject keeps only its last reports, and nothing else below its name is stored at all.
- Suppressing a report: JetStream drops a message whose id it saw lately, whatever its subject, and a runner may set
  any id. The attacker publishes first with the id the victim would use if that id could be predicted; the
  victim's real publishing code (runner/agent.py `report`) must still get its report into the stream.
"""

from __future__ import annotations

import asyncio

import nats
import pytest
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import DiscardPolicy
from nats.js.errors import APIError, NoStreamResponseError, NotFoundError

from runner.agent import report
from runner.container import run_completed
from schemas.contracts import FullResult
from schemas.streams import (
    DEAD_LETTERS,
    EVENTS,
    MAX_EVENT_BYTES,
    RUNNER_REPORTS,
    runner_inbox_prefix,
    runner_report_subject,
)
from services.kit.bus import declare_streams, make_broker
from tests.support.shipped_nats import ShippedNats, start_shipped_nats, stop

ACCOUNT_FILE_QUOTA = 100 * 1000**3  # `max_file: 100GB` of the shipped KERNELBOT account
FLOOD_MESSAGE = b"x" * (256 * 1024)


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> ShippedNats:
    server = start_shipped_nats(tmp_path_factory.mktemp("report-streams"))
    asyncio.run(_declare(server))
    yield server
    stop(server)


async def _declare(server: ShippedNats) -> None:
    broker = make_broker(server.url("services"))
    await broker.connect()
    try:
        await declare_streams(broker)
    finally:
        await broker.stop()


async def _as_runner(server: ShippedNats, runner: str):
    return await nats.connect(server.url(f"runner-{runner}"), inbox_prefix=runner_inbox_prefix(runner),
                              allow_reconnect=False)


async def _services(server: ShippedNats):
    return await nats.connect(server.url("services"), allow_reconnect=False)


def test_the_streams_a_runner_feeds_are_bounded_and_leave_the_account_room_for_events(shipped):
    async def check():
        services = await _services(shipped)
        try:
            js = services.jetstream()
            reports = (await js.stream_info(RUNNER_REPORTS.name)).config
            letters = (await js.stream_info(DEAD_LETTERS.name)).config
        finally:
            await services.close()
        for config in (reports, letters):
            assert config.max_bytes and config.max_bytes > 0, f"{config.name} has no byte limit"
            assert config.max_msg_size and 0 < config.max_msg_size <= MAX_EVENT_BYTES, config.name
            assert config.max_msgs_per_subject and config.max_msgs_per_subject > 0, config.name
        # a full report stream refuses new reports; it never evicts another runner's report that is not yet relayed
        assert reports.discard == DiscardPolicy.NEW
        # every subject of the report stream names one runner, and holds a bounded share of it
        assert reports.subjects == ["runner.*.run.completed"]
        assert reports.max_msgs_per_subject * reports.max_msg_size < reports.max_bytes
        # what runners can make the platform store, all streams together, leaves most of the quota to EVENTS
        assert reports.max_bytes + letters.max_bytes <= ACCOUNT_FILE_QUOTA // 10

    asyncio.run(check())


def test_a_runner_flooding_its_own_subject_keeps_only_its_last_reports_and_events_still_flow(shipped):
    async def attack(runner: str) -> None:
        client = await _as_runner(shipped, runner)
        services = await _services(shipped)
        try:
            js, services_js = client.jetstream(), services.jetstream()
            own = runner_report_subject(runner, "evt.run.completed")
            limit = (await services_js.stream_info(RUNNER_REPORTS.name)).config.max_msgs_per_subject
            flood = (limit if limit and limit > 0 else 128) + 40
            for n in range(flood):
                await js.publish(own, FLOOD_MESSAGE, stream=RUNNER_REPORTS.name, headers={"Nats-Msg-Id": f"{runner}-flood-{n}"})
            kept = await services_js.stream_info(RUNNER_REPORTS.name, subjects_filter=own)
            assert kept.state.subjects[own] < flood, f"runner {runner} stored all {flood} of its flood"
            # any other subject below its name is stored nowhere
            for subject in (f"runner.{runner}.anything.1", f"runner.{runner}.run.completed.more"):
                with pytest.raises((NoRespondersError, NoStreamResponseError, NatsTimeout, APIError)):
                    await js.publish(subject, FLOOD_MESSAGE, timeout=1)
            total = (await services_js.stream_info(RUNNER_REPORTS.name)).state.bytes
            assert total <= limit * (len(FLOOD_MESSAGE) + 1024) * len(shipped.runners()), total
            ack = await services_js.publish("evt.submission.received", b"{}", stream=EVENTS.name)
            assert ack.seq > 0
        finally:
            await client.close()
            await services.close()

    for runner in shipped.runners():
        asyncio.run(attack(runner))


def test_a_runner_cannot_suppress_another_runners_report_by_publishing_its_message_id_first(shipped):
    victim, attacker = shipped.runners()[0], shipped.runners()[-1]
    assert victim != attacker, "the shipped configuration names two runners"
    run_id = "4242.H100.secret"
    event = run_completed({"run_id": run_id}, FullResult(success=True), as_runner=True)
    assert event is not None
    victims_subject = runner_report_subject(victim, event.subject)

    async def attack():
        forger = await _as_runner(shipped, attacker)
        honest = await _as_runner(shipped, victim)
        services = await _services(shipped)
        try:
            # every id the victim's report could carry that the attacker can compute from what it sees
            for guess in (event.message_id, f"{victim}:{event.message_id}"):
                await forger.jetstream().publish(runner_report_subject(attacker, event.subject), b"{}",
                                                 stream=RUNNER_REPORTS.name, headers={"Nats-Msg-Id": guess})
            await report(honest.jetstream(), victim, run_id, FullResult(success=True))
            return await _last_report(services, victims_subject)
        finally:
            await forger.close()
            await honest.close()
            await services.close()

    last = asyncio.run(attack())
    assert last is not None and run_id.encode() in last, f"runner {attacker} suppressed runner {victim}'s report"


async def _last_report(services, subject: str) -> bytes | None:
    try:
        return (await services.jetstream().get_last_msg(RUNNER_REPORTS.name, subject)).data
    except NotFoundError:
        return None
