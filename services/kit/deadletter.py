"""Failure policy for every consumer: retry transient errors with a delay, move poison to the dead-letter stream.

Poison is only what can never be applied: a body that does not decode or validate, a subject no event has, an
`Inadmissible` message. A handler that raises anything else (KeyError, AttributeError: a bug, or a row not there
yet) is retried with a growing delay and raises an alert on every attempt (`kb_handler_errors` and an ERROR line
naming the event id). Past MAX_DELIVERIES it is dead-lettered too, with a reason starting `handler error:`, so that
an operator replays it once the bug is fixed (`kernelbot deadletters replay`): left unacknowledged it would block
an ordered consumer, and JetStream would drop it after its own limit with only an advisory.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from typing import Any

from faststream import BaseMiddleware
from nats.aio.msg import Msg
from pydantic import ValidationError

from schemas.streams import DEAD_LETTERS, dead_letter_subject
from services.kit import metrics
from services.kit.bus import MSG_ID_HEADER, UnknownSubject
from services.kit.outage import is_outage

log = logging.getLogger("kernelbot.deadletter")

# Deliveries of one message before it is judged poison and moved to the dead-letter stream. A constant, not a
# setting: it is part of each durable consumer's JetStream config, declared with the subscribers (as each consumer's
# ack wait is, services/kit/runtime.py), and replicas sharing a consumer must agree on it.
MAX_DELIVERIES = 5
# JetStream's own limit sits above ours, so a message that kills the process every time still stops.
JETSTREAM_MAX_DELIVER = MAX_DELIVERIES + 2


def retry_delay_s(delivered: int) -> float:
    return min(30.0, 0.25 * 2 ** (delivered - 1))


class Inadmissible(ValueError):
    """A well-formed message that must never be applied (a runner reporting a run that is not its own): it goes to
    the dead-letter stream at once, with this message as the reason, for an operator to look at."""


def is_poison(exc: BaseException) -> bool:
    return isinstance(exc, (ValidationError, json.JSONDecodeError, UnicodeDecodeError, UnknownSubject, Inadmissible))


HANDLER_ERROR = "handler error"


def event_id(raw: Msg) -> str:
    """The event's id (its de-duplication header), the name operators search the logs and the archive by."""
    return (getattr(raw, "headers", None) or {}).get(MSG_ID_HEADER, "?")


def report_handler_error(raw: Msg, exc: BaseException) -> None:
    """A handler failed on a well-formed event: an alert each time, whatever happens to the message next."""
    meta = raw.metadata
    metrics.handler_error(meta.consumer, raw.subject, exc)
    log.error("handler error on event %s (%s seq %s, delivery %s of %s): %r", event_id(raw), meta.consumer,
              meta.sequence.stream, meta.num_delivered, MAX_DELIVERIES, exc, exc_info=exc)


async def dead_letter(raw: Msg, exc: BaseException, *, handler_error: bool = False) -> None:
    """Copy a message to the dead-letter stream with the reason it failed, then stop its redelivery."""
    meta = raw.metadata
    cause = f"{HANDLER_ERROR}: " if handler_error else ""
    reason = f"{cause}{type(exc).__name__}: {exc}".replace("\n", " ")[:1000]
    log.error("dead-lettering %s seq %s: %s", meta.consumer, meta.sequence.stream, reason)
    headers = {
        MSG_ID_HEADER: f"dlq:{meta.consumer}:{meta.sequence.stream}",
        "Kb-Reason": reason,
        "Kb-Consumer": meta.consumer,
        "Kb-Stream": meta.stream,
        "Kb-Stream-Seq": str(meta.sequence.stream),
        "Kb-Subject": raw.subject,
        "Kb-Deliveries": str(meta.num_delivered),
    }
    js = raw._client.jetstream()
    await js.publish(dead_letter_subject(meta.consumer), raw.data, headers=headers, stream=DEAD_LETTERS.name)
    await raw.term()


# An ordered consumer holds its batch through an outage this many tries (about 2 minutes) before giving it back.
OUTAGE_ATTEMPTS = 12


def outage_delay_s(delivered: int) -> float:
    # longer than a bug's retries: JetStream's delivery limit then allows about 90 s of outage
    return min(30.0, 2.0 * 2 ** (delivered - 1))


async def retry_or_dead_letter(raw: Msg, exc: BaseException) -> None:
    meta = raw.metadata
    if is_outage(exc) and not is_poison(exc):
        # never judged poison for an outage; past JetStream's own limit it still lands in the dead-letter stream
        log.warning("waiting out an outage for %s seq %s: %r", meta.consumer, meta.sequence.stream, exc)
        await raw.nak(delay=outage_delay_s(meta.num_delivered))
    elif is_poison(exc):
        await dead_letter(raw, exc)
    else:
        report_handler_error(raw, exc)
        if meta.num_delivered >= MAX_DELIVERIES:
            await dead_letter(raw, exc, handler_error=True)
        else:
            await raw.nak(delay=retry_delay_s(meta.num_delivered))


def retry_delay_of(raw: Msg, exc: BaseException) -> float:
    """The delay retry_or_dead_letter gives a message failing with `exc` (its followers wait as long)."""
    delivered = raw.metadata.num_delivered
    return outage_delay_s(delivered) if is_outage(exc) else retry_delay_s(delivered)


_current_message: ContextVar[Any] = ContextVar("kernelbot_current_message")


def current_message() -> Any:
    """The FastStream message being handled in this task (a NatsMessage, or a NatsBatchMessage for batches).

    Handlers read it here rather than through FastStream's `Context()`, which resolves in a worker thread for every
    message and cost more CPU than the handlers themselves.
    """
    return _current_message.get()


class DeadLetterMiddleware(BaseMiddleware):
    async def consume_scope(self, call_next: Any, msg: Any) -> Any:
        token = _current_message.set(msg)
        try:
            with metrics.handling(msg):
                return await call_next(msg)
        except Exception as exc:  # noqa: BLE001 - every failure is either retried or dead-lettered
            raws = msg.raw_message if isinstance(msg.raw_message, list) else [msg.raw_message]
            for raw in raws:
                if not raw._ackd:
                    await retry_or_dead_letter(raw, exc)
            return None
        finally:
            _current_message.reset(token)
