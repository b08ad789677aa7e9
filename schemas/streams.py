"""The only stream definitions. Every service declares streams through these, so settings never diverge."""

from __future__ import annotations

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


EVENTS = StreamSpec(EVENTS_STREAM, ("evt.>",), DUPLICATE_WINDOW_S, MAX_EVENT_BYTES)
# Besides what consumers dead-letter themselves, JetStream's max-delivery advisories for the events stream are kept:
# they catch a message that kills its consumer every time it is delivered.
MAX_DELIVERIES_ADVISORY = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{EVENTS_STREAM}.>"
DEAD_LETTERS = StreamSpec(
    DEAD_LETTER_STREAM,
    (f"{DEAD_LETTER_PREFIX}.>", MAX_DELIVERIES_ADVISORY),
    DUPLICATE_WINDOW_S,
    MAX_EVENT_BYTES,
)
# What runners on GPU hosts report, each under its own name (`runner.<name>.run.completed`): a runner's NATS user may
# publish only below its own name, and the dispatcher turns a report into the event after checking that the run is
# on a GPU that runner serves (services/dispatcher/runner_reports.py). Kept a week: reports are relayed in seconds.
RUNNER_REPORTS_STREAM = "RUNNER_REPORTS"
RUNNER_REPORT_PREFIX = "runner"
RUNNER_REPORTS = StreamSpec(RUNNER_REPORTS_STREAM, (f"{RUNNER_REPORT_PREFIX}.>",), DUPLICATE_WINDOW_S,
                            MAX_EVENT_BYTES, max_age_s=7 * 24 * 3600.0)
ALL_STREAMS = (EVENTS, DEAD_LETTERS, RUNNER_REPORTS)


def runner_report_subject(runner: str, event_subject: str) -> str:
    """`evt.run.completed` reported by runner `acme` travels as `runner.acme.run.completed`."""
    return f"{RUNNER_REPORT_PREFIX}.{runner}.{event_subject.removeprefix('evt.')}"


def runner_report_id(runner: str, message_id: str) -> str:
    """A report's Nats-Msg-Id, scoped to its runner: one runner's report can never be dropped as a duplicate of
    another's (a forged report published first must not shadow the honest one)."""
    return f"{runner}:{message_id}"


def dead_letter_subject(consumer: str) -> str:
    return f"{DEAD_LETTER_PREFIX}.{consumer}"
