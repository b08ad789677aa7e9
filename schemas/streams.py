"""The only stream definitions. Every service declares streams through these, so settings never diverge."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

EVENTS_STREAM = "EVENTS"
DEAD_LETTER_STREAM = "DEADLETTER"
DEAD_LETTER_PREFIX = "dlq"
DUPLICATE_WINDOW_S = 300.0
# A 1 MB submission is JSON-escaped inside an event; leave room for the worst case of escaping.
MAX_EVENT_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class StreamSpec:
    name: str
    subjects: tuple[str, ...]
    duplicate_window_s: float
    max_msg_size: int
    max_age_s: float = 0.0  # 0 keeps everything: the event log is the source of truth
    # "limits" keeps messages until their age or the stream's limits; "workqueue" drops each once a consumer acks it
    retention: str = "limits"
    # -1 is no limit. What others than the services can make the platform store (a runner's reports, what the
    # services dead-letter of them) is bounded, so that it cannot use up the account's storage that EVENTS needs.
    max_bytes: int = -1
    max_msgs_per_subject: int = -1  # the oldest message of a subject makes room: only that subject's publisher's
    discard: str = "old"  # what a full stream does: "old" drops its oldest message, "new" refuses the publish


EVENTS = StreamSpec(EVENTS_STREAM, ("evt.>",), DUPLICATE_WINDOW_S, MAX_EVENT_BYTES)
# Besides what consumers dead-letter themselves, JetStream's max-delivery advisories for the events stream are kept:
# they catch a message that kills its consumer every time it is delivered.
MAX_DELIVERIES_ADVISORY = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{EVENTS_STREAM}.>"
# Bounded, because a runner feeds it: each report the dispatcher refuses is kept here. Full, it drops its oldest
# letters rather than refuse one, so that dead-lettering never stalls the consumer doing it; and no consumer's
# subject (`dlq.<consumer>`) holds more than DEAD_LETTERS_PER_CONSUMER of them.
DEAD_LETTERS_BYTES = 2 * 1024**3
DEAD_LETTERS_PER_CONSUMER = 10_000
DEAD_LETTERS = StreamSpec(
    DEAD_LETTER_STREAM,
    (f"{DEAD_LETTER_PREFIX}.>", MAX_DELIVERIES_ADVISORY),
    DUPLICATE_WINDOW_S,
    MAX_EVENT_BYTES,
    max_bytes=DEAD_LETTERS_BYTES,
    max_msgs_per_subject=DEAD_LETTERS_PER_CONSUMER,
)
# What runners on GPU hosts report, each under its own name (`runner.<name>.run.completed`): a runner's NATS user may
# publish only below its own name, and the dispatcher turns a report into the event after checking that the run is
# on a GPU that runner serves (services/dispatcher/runner_reports.py). Kept a week: reports are relayed in seconds.
# One subject per runner, and nothing else of `runner.<name>.>` is stored, so each runner's share is bounded: its
# subject keeps its last REPORTS_PER_RUNNER reports (a runner that floods drops only its own), and the stream as a
# whole refuses new reports past RUNNER_REPORTS_BYTES rather than grow into the storage EVENTS needs.
RUNNER_REPORTS_STREAM = "RUNNER_REPORTS"
RUNNER_REPORT_PREFIX = "runner"
REPORTS_PER_RUNNER = 128
RUNNER_REPORTS_BYTES = 4 * 1024**3
RUNNER_REPORTS = StreamSpec(RUNNER_REPORTS_STREAM, (f"{RUNNER_REPORT_PREFIX}.*.run.completed",), DUPLICATE_WINDOW_S,
                            MAX_EVENT_BYTES, max_age_s=7 * 24 * 3600.0, max_bytes=RUNNER_REPORTS_BYTES,
                            max_msgs_per_subject=REPORTS_PER_RUNNER, discard="new")
# Jobs for runner agents on GPU hosts (runner/agent.py), one subject per runner identity and GPU:
# `jobs.<runner>.<gpu>`. Each is read through one durable pull consumer, `<runner>-<gpu>`, that the dispatcher creates;
# a runner's NATS user may pull from its own consumers only, so a job (the submission, the run's seed) reaches no other
# runner. A work queue: a job leaves the stream once its agent acknowledges it. A day bounds an unpulled job, far past
# any run's budget (the dispatcher deletes a job it gave up on before then).
RUNNER_JOBS_STREAM = "RUNNER_JOBS"
RUNNER_JOB_PREFIX = "jobs"
RUNNER_JOBS = StreamSpec(RUNNER_JOBS_STREAM, (f"{RUNNER_JOB_PREFIX}.>",), DUPLICATE_WINDOW_S, MAX_EVENT_BYTES,
                         max_age_s=24 * 3600.0, retention="workqueue")
ALL_STREAMS = (EVENTS, DEAD_LETTERS, RUNNER_REPORTS, RUNNER_JOBS)
# A runner's replies (publish acknowledgements, pulled jobs) arrive below its own inbox prefix, the only subjects its
# NATS user may subscribe to: never `_INBOX.>`, where the services' push consumers deliver every event.
RUNNER_INBOX_PREFIX = "_INBOX_runner"


def runner_report_subject(runner: str, event_subject: str) -> str:
    """`evt.run.completed` reported by runner `acme` travels as `runner.acme.run.completed`."""
    return f"{RUNNER_REPORT_PREFIX}.{runner}.{event_subject.removeprefix('evt.')}"


def runner_report_id(runner: str, message_id: str, nonce: str) -> str:
    """A report's Nats-Msg-Id. JetStream drops a message whose id it saw in the last DUPLICATE_WINDOW_S on ANY
    subject of the stream, and any runner may set any id, so an id another runner can predict lets it publish
    first and have the honest report dropped. The nonce, drawn once per report (runner_report_nonce) and kept for its
    retries, makes the id unguessable; the runner's name makes it readable. The dispatcher is idempotent per run, so
    two copies of one report that both got through do no harm."""
    return f"{runner}:{message_id}:{nonce}"


def runner_report_nonce() -> str:
    return secrets.token_hex(16)


def runner_job_subject(runner: str, gpu: str) -> str:
    return f"{RUNNER_JOB_PREFIX}.{runner}.{gpu}"


def runner_job_consumer(runner: str, gpu: str) -> str:
    """The durable pull consumer of runner `runner`'s jobs on `gpu`, the one name its NATS permissions grant."""
    return f"{runner}-{gpu}"


def runner_inbox_prefix(runner: str) -> str:
    """`_INBOX_runner_acme`: where runner `acme`'s connection receives its replies (nats-py `inbox_prefix`)."""
    return f"{RUNNER_INBOX_PREFIX}_{runner}"


def dead_letter_subject(consumer: str) -> str:
    return f"{DEAD_LETTER_PREFIX}.{consumer}"
