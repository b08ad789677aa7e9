"""The consumers' failure policy: transient errors come back later, poison goes to the dead-letter stream."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from schemas.events import RunFailed
from services.kit import deadletter
from services.kit.bus import UnknownSubject


@dataclass
class Recorder:
    published: list = field(default_factory=list)

    def jetstream(self):
        return self

    async def publish(self, subject, data, headers=None, stream=None):
        self.published.append((subject, data, headers, stream))


@dataclass
class FakeMsg:
    """The parts of a nats-py JetStream message the policy reads, recording what is done to it."""

    delivered: int
    subject: str = "evt.run.failed"
    data: bytes = b"{}"
    outcome: list = field(default_factory=list)
    _client: Recorder = field(default_factory=Recorder)

    @property
    def metadata(self):
        return SimpleNamespace(consumer="scorer-run-failed", stream="EVENTS", num_delivered=self.delivered,
                               sequence=SimpleNamespace(stream=42))

    async def nak(self, delay=None):
        self.outcome.append(("nak", delay))

    async def term(self):
        self.outcome.append(("term", None))


def _validation_error() -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        RunFailed.model_validate_json(b'{"run_id": 1}')
    return caught.value


async def test_a_transient_error_is_retried_later_with_a_growing_delay():
    first, third = FakeMsg(delivered=1), FakeMsg(delivered=3)
    await deadletter.retry_or_dead_letter(first, RuntimeError("deadlock detected"))
    await deadletter.retry_or_dead_letter(third, RuntimeError("deadlock detected"))
    assert first.outcome == [("nak", 0.25)] and third.outcome == [("nak", 1.0)]
    assert first._client.published == []


async def test_a_poison_message_is_dead_lettered_at_once_with_its_reason():
    msg = FakeMsg(delivered=1, data=b'{"run_id": 1}')
    await deadletter.retry_or_dead_letter(msg, _validation_error())
    [(subject, data, headers, stream)] = msg._client.published
    assert (subject, data, stream) == ("dlq.scorer-run-failed", b'{"run_id": 1}', "DEADLETTER")
    assert headers["Kb-Stream-Seq"] == "42" and headers["Kb-Subject"] == "evt.run.failed"
    assert headers["Kb-Reason"].startswith("ValidationError")
    assert headers["Nats-Msg-Id"] == "dlq:scorer-run-failed:42"  # a second dead-lettering is dropped
    assert msg.outcome == [("term", None)]


async def test_an_error_that_keeps_coming_back_is_dead_lettered_after_the_bound():
    msg = FakeMsg(delivered=deadletter.MAX_DELIVERIES)
    await deadletter.retry_or_dead_letter(msg, RuntimeError("deadlock detected"))
    assert msg.outcome == [("term", None)]
    headers = msg._client.published[0][2]
    assert headers["Kb-Deliveries"] == str(deadletter.MAX_DELIVERIES)
    # an operator tells a handler bug (replay it once fixed) from a malformed event
    assert headers["Kb-Reason"] == "handler error: RuntimeError: deadlock detected"


async def test_an_outage_is_waited_out_longer_and_never_judged_poison_by_the_consumer():
    """Found by bench/chaos.py: a Postgres restart outlasted the bug retries and the ledger dead-lettered events."""
    msg = FakeMsg(delivered=deadletter.MAX_DELIVERIES)
    await deadletter.retry_or_dead_letter(msg, ConnectionError("database restarting"))
    assert msg.outcome == [("nak", 30.0)] and msg._client.published == []
    first = FakeMsg(delivered=1)
    await deadletter.retry_or_dead_letter(first, OSError(2, "No such file or directory"))  # the socket is gone
    assert first.outcome == [("nak", 2.0)]


def test_poison_is_decided_by_the_kind_of_error():
    assert deadletter.is_poison(_validation_error())
    assert deadletter.is_poison(json.JSONDecodeError("x", "", 0))
    assert not deadletter.is_poison(ConnectionError())
    assert deadletter.is_poison(UnknownSubject("evt.nothing"))
    # a bug in a handler is not the event's fault
    assert not deadletter.is_poison(KeyError("user_id")) and not deadletter.is_poison(AttributeError("x"))
    assert deadletter.retry_delay_s(100) == 30.0
