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
ALL_STREAMS = (EVENTS, DEAD_LETTERS)


def dead_letter_subject(consumer: str) -> str:
    return f"{DEAD_LETTER_PREFIX}.{consumer}"
