"""Runner identities on NATS (docs/security.md): a runner's user, with the SHIPPED permissions, reads nothing meant for
the services or for another runner, while its own jobs still reach it and its reports are accepted.

One real nats-server runs deploy/nats/cluster.conf (cluster block dropped, accounts and permissions as shipped). The
services user declares the real streams and consumers and publishes a submission (its code and a seed) the way the
platform does, and a job for every runner agent; each runner in turn, as an attacker holding its own password,
listens on every subject it can name and asks the JetStream API for what is not its own.
"""

from __future__ import annotations

import asyncio
import json

import nats
import pytest
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from schemas.events import RunCompleted
from schemas.streams import (
    EVENTS,
    RUNNER_JOBS,
    RUNNER_REPORTS,
    dead_letter_subject,
    runner_inbox_prefix,
    runner_job_consumer,
    runner_job_subject,
    runner_report_id,
    runner_report_nonce,
    runner_report_subject,
)
from services.dispatcher.backends.agent import declare_job_consumers
from services.kit.bus import declare_streams, make_broker
from services.kit.runtime import durable_consumer
from tests.support.shipped_nats import SHIPPED_CONFIG, ShippedNats, agent_consumers, start_shipped_nats, stop

SECRET = "SECRET-7f3a"  # in every message not meant for the attacker
DENIED_WAIT_S = 1.0
# An agent no user of the shipped configuration is: with one agent runner shipped, its consumer is the "other
# runner's" consumer that a wildcard in anyone's permissions (`RUNNER_JOBS.>`) would open.
DECOY = ("decoy", "B200")


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> ShippedNats:
    server = start_shipped_nats(tmp_path_factory.mktemp("shipped-nats"))
    yield server
    stop(server)


def _agent_gpus(server: ShippedNats) -> dict[str, tuple[str, str]]:
    """Every runner agent's (runner, GPU) as the shipped permissions name its consumers `<runner>-<gpu>`, and the
    decoy's."""
    shipped = {consumer[len(runner) + 1:]: (runner, consumer[len(runner) + 1:])
               for runner in server.runners() for consumer in server.consumers(runner)}
    return {**shipped, DECOY[1]: DECOY}


def test_the_shipped_configuration_names_at_least_one_agent_and_one_reporting_runner():
    found = agent_consumers(SHIPPED_CONFIG.read_text())
    assert any(found.values()) and any(not consumers for consumers in found.values()), found


async def _services_side(server: ShippedNats):
    """Streams, the dispatcher's push consumer and the agents' job consumers, as the platform declares them."""
    broker = make_broker(server.url("services"))
    await broker.connect()
    await declare_streams(broker)
    client = broker.connection
    js = client.jetstream()
    admit = durable_consumer(f"dispatcher-admit-{id(client)}")
    admit["config"].deliver_group = admit["queue"]  # as FastStream binds a queue group's push consumer
    await js.add_consumer(EVENTS.name, admit["config"])
    delivered = asyncio.Queue()
    await client.subscribe(admit["config"].deliver_subject, queue=admit["queue"], cb=delivered.put)
    await declare_job_consumers(js, _agent_gpus(server))
    return broker, js, delivered


async def _attack(server: ShippedNats, attacker: str) -> None:
    broker, services_js, delivered = await _services_side(server)
    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    client = await nats.connect(server.url(f"runner-{attacker}"), inbox_prefix=runner_inbox_prefix(attacker),
                                error_cb=on_error, allow_reconnect=False)
    try:
        heard: dict[str, list[bytes]] = {}
        everything = [">", "_INBOX.>", "_INBOX.kb-deliver.>", "evt.>", "jobs.>", "dlq.>", "runner.>", "$JS.>",
                      f"{runner_inbox_prefix(attacker)}.>",
                      *(f"{runner_inbox_prefix(other)}.>" for other in [*server.runners(), DECOY[0]]
                        if other != attacker)]
        for subject in everything:
            heard[subject] = []
            await client.subscribe(subject, cb=_collect(heard[subject]))
        await client.flush()

        # the platform at work: a submission (its code and seed) delivered to the dispatcher, a job for every agent
        await services_js.publish("evt.submission.received", json.dumps({"code": SECRET, "seed": 7}).encode(),
                                  stream=EVENTS.name)
        await asyncio.wait_for(delivered.get(), 10)
        jobs = _agent_gpus(server)
        for runner, gpu in jobs.values():
            payload = "its own job" if runner == attacker else SECRET
            await services_js.publish(runner_job_subject(runner, gpu),
                                      json.dumps({"run_id": f"{runner}.{gpu}", "payload": payload}).encode(),
                                      stream=RUNNER_JOBS.name)
        await client.flush()  # anything routed to the attacker before this arrives before the flush's answer

        leaked = {subject: [m[:80] for m in messages if SECRET.encode() in m] for subject, messages in heard.items()}
        assert {s: m for s, m in leaked.items() if m} == {}, f"runner {attacker} read what is not its own"
        # the listening was refused by the server, not merely quiet
        refused = {s for s in everything if any(f'subscription to "{s.lower()}"' in e.lower() for e in errors)}
        assert refused == set(everything) - {f"{runner_inbox_prefix(attacker)}.>"}, errors

        # what it may not ask of JetStream: other consumers, stream contents, new consumers, the stream list; nor
        # publish as another runner (the dispatcher names the reporter by the subject) or into the services' streams
        others = [runner_job_consumer(r, g) for r, g in jobs.values() if r != attacker]
        impostors = [runner_report_subject(other, "evt.run.completed") for other in [*server.runners(), DECOY[0]]
                     if other != attacker]
        asks = [*(f"$JS.API.CONSUMER.MSG.NEXT.{RUNNER_JOBS.name}.{name}" for name in others),
                f"$JS.API.STREAM.MSG.GET.{EVENTS.name}", f"$JS.API.STREAM.MSG.GET.{RUNNER_JOBS.name}",
                f"$JS.API.DIRECT.GET.{EVENTS.name}", "$JS.API.STREAM.LIST", f"$JS.API.STREAM.INFO.{EVENTS.name}",
                f"$JS.API.CONSUMER.CREATE.{EVENTS.name}", f"$JS.API.CONSUMER.DURABLE.CREATE.{EVENTS.name}.mine",
                f"$JS.API.CONSUMER.CREATE.{RUNNER_JOBS.name}.mine.jobs.>", "evt.submission.received",
                "evt.run.completed", *impostors, dead_letter_subject("dispatcher-runner-reports")]
        answers = await asyncio.gather(*(_ask(client, subject) for subject in asks))
        answered = {subject: answer for subject, answer in zip(asks, answers, strict=True) if answer is not None}
        assert answered == {}, f"runner {attacker} got answers from the JetStream API: {answered}"

        # its own work still flows: its jobs, one per GPU it serves, and its report accepted
        js = client.jetstream()
        own = [gpu for runner, gpu in jobs.values() if runner == attacker]
        for gpu in own:
            pulled = await js.pull_subscribe_bind(runner_job_consumer(attacker, gpu), stream=RUNNER_JOBS.name)
            [job] = await pulled.fetch(1, timeout=5)
            assert json.loads(job.data)["run_id"] == f"{attacker}.{gpu}"
            await job.ack()
        report = RunCompleted(run_id=f"{attacker}.run", submission_id=0, leaderboard="", gpu="", mode="test",
                              backend="agent", result={"success": True})
        ack = await js.publish(runner_report_subject(attacker, report.subject), report.model_dump_json().encode(),
                               headers={"Nats-Msg-Id": runner_report_id(attacker, report.message_id, runner_report_nonce())},
                               stream=RUNNER_REPORTS.name, timeout=5)
        assert ack.stream == RUNNER_REPORTS.name
        await client.flush()

        # and the other runners' jobs are still waiting for them
        for runner, gpu in jobs.values():
            if runner != attacker:
                info = await services_js.consumer_info(RUNNER_JOBS.name, runner_job_consumer(runner, gpu))
                assert info.num_pending == 1, (runner, gpu, info)
    finally:
        await client.close()
        await services_js.purge_stream(RUNNER_JOBS.name)
        await broker.stop()


def _collect(into: list[bytes]):
    async def collect(message) -> None:
        into.append(message.data)
    return collect


async def _ask(client, subject: str) -> bytes | None:
    try:
        return (await client.request(subject, b"{}", timeout=DENIED_WAIT_S)).data
    except (NatsTimeout, NoRespondersError, TimeoutError):
        return None


@pytest.mark.parametrize("attacker", sorted(agent_consumers(SHIPPED_CONFIG.read_text())))
def test_a_runner_reads_only_its_own_jobs_and_replies(shipped, attacker):
    asyncio.run(_attack(shipped, attacker))
