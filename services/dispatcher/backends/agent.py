"""The agent backend: runner agents on GPU hosts (runner/agent.py) pull their jobs from NATS and report each result
under their own runner identity; the platform's credentials never leave the platform zone.

A launch publishes the job to `jobs.<runner>.<gpu>` of the RUNNER_JOBS work queue, read by one durable pull
consumer per runner and GPU that the dispatcher creates at start (a runner's NATS user may pull from it but create
none). The launch key is the message id, so a launch repeated within the stream's duplicate window finds the job it
published before. The job reference is `<stream sequence>:<run id>`. Nothing is collected: the run ends when the
runner's report is recorded (services/dispatcher/handlers.py), which the poll reads from the run queue. A job its
runner never answers ends on the dispatcher's clock like any other; cancelling it deletes it from the queue if no agent
has taken it yet, so an agent that comes back late never runs it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import asyncpg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from runner.task.payload import encode_payload
from schemas.contracts import RunPayload
from schemas.streams import RUNNER_JOBS, runner_job_consumer, runner_job_subject
from services.dispatcher import repository
from services.dispatcher.backends.base import PENDING, BackendUnavailable, JobLost, LaunchError, Outcome

log = logging.getLogger("kernelbot.dispatcher.agent")

PUBLISH_TIMEOUT_S = 10.0
# An agent acknowledges a job as it takes it; one that dies before doing so hands it to another agent after this.
JOB_ACK_WAIT_S = 60.0


@dataclass(frozen=True)
class AgentJobs:
    """What agent lanes share: the dispatcher's JetStream context and its database pool."""

    js: JetStreamContext
    pool: asyncpg.Pool


async def declare_job_consumers(js: JetStreamContext, queues: dict[str, tuple[str, str]]) -> None:
    """One durable pull consumer per agent GPU (Catalogue.agent_queues), the same definition from every replica."""
    for runner, gpu in queues.values():
        name = runner_job_consumer(runner, gpu)
        await js.add_consumer(RUNNER_JOBS.name, ConsumerConfig(
            durable_name=name, filter_subject=runner_job_subject(runner, gpu), ack_policy=AckPolicy.EXPLICIT,
            ack_wait=JOB_ACK_WAIT_S, deliver_policy=DeliverPolicy.ALL, max_ack_pending=1_000))


def job_message(payload: RunPayload) -> bytes:
    """What an agent receives: the run it reports and the payload it runs (the same encoding as other backends)."""
    return json.dumps({"run_id": payload.run_id, "payload": encode_payload(payload)}).encode()


class AgentBackend:
    name = "agent"

    def __init__(self, jobs: AgentJobs, runner: str, gpu: str, poll_interval_s: float) -> None:
        self.jobs = jobs
        self.runner = runner
        self.gpu = gpu
        self.poll_interval_s = poll_interval_s

    async def launch(self, payload: RunPayload, launch_key: str) -> str:
        try:
            ack = await self.jobs.js.publish(
                runner_job_subject(self.runner, self.gpu), job_message(payload), stream=RUNNER_JOBS.name,
                headers={"Nats-Msg-Id": launch_key}, timeout=PUBLISH_TIMEOUT_S)
        except TimeoutError as exc:
            raise BackendUnavailable(f"the job queue did not acknowledge the job: {exc!r}") from exc
        except NatsError as exc:
            raise LaunchError(f"the job queue refused the job: {exc!r}") from exc
        return f"{ack.seq}:{payload.run_id}"

    async def poll(self, job_ref: str) -> Outcome:
        _, _, run_id = job_ref.partition(":")
        try:
            finished = await repository.run_finished(self.jobs.pool, run_id)
        except (OSError, asyncpg.PostgresError) as exc:
            raise BackendUnavailable(f"cannot read the run's state: {exc!r}") from exc
        if not finished:
            return PENDING
        # Not recorded again: the runner's report has finished the run, so the scheduler's finish is a no-op.
        return JobLost("lost", f"run {run_id} was reported by runner {self.runner}")

    async def cancel(self, job_ref: str) -> None:
        sequence, _, _ = job_ref.partition(":")
        try:
            await self.jobs.js.delete_msg(RUNNER_JOBS.name, int(sequence))
        except NatsError as exc:  # already taken by an agent (and so acknowledged and gone), or expired
            log.info("job %s was no longer queued for runner %s: %r", job_ref, self.runner, exc)
