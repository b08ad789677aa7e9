"""The dead-letter stream as operators see it: why each message failed, sending it back, throwing it away."""

from __future__ import annotations

import json
from dataclasses import dataclass

from nats.aio.client import Client
from nats.js.errors import NotFoundError

from schemas.streams import DEAD_LETTERS, EVENTS
from services.kit.bus import MSG_ID_HEADER
from services.operate.stream import stream_bounds


@dataclass(frozen=True)
class DeadLetter:
    seq: int
    consumer: str
    subject: str  # where the original was published
    stream_seq: int  # its sequence in the events stream
    deliveries: int
    reason: str
    data: bytes  # the original message; empty for an advisory (the original is still in the events stream)
    headers: dict[str, str]

    @property
    def from_advisory(self) -> bool:
        return not self.headers.get("Kb-Consumer")


def parse(seq: int, subject: str, headers: dict[str, str], data: bytes) -> DeadLetter:
    """A dead letter a consumer wrote itself (Kb-* headers), or JetStream's max-deliveries advisory."""
    if headers.get("Kb-Consumer"):
        return DeadLetter(seq, headers["Kb-Consumer"], headers.get("Kb-Subject", ""),
                          int(headers.get("Kb-Stream-Seq", "0")), int(headers.get("Kb-Deliveries", "0")),
                          headers.get("Kb-Reason", ""), data, headers)
    try:
        advisory = json.loads(data)
    except ValueError:
        advisory = {}
    return DeadLetter(seq, advisory.get("consumer", "?"), "", int(advisory.get("stream_seq", 0)),
                      int(advisory.get("deliveries", 0)),
                      "delivered the maximum number of times without an acknowledgement (the consumer crashed or "
                      "hung on it every time)", b"", headers)


async def listing(client: Client, consumer: str | None = None) -> list[DeadLetter]:
    first, last, count = await stream_bounds(client, DEAD_LETTERS.name)
    if not count:
        return []
    found = []
    for seq in range(first, last + 1):
        try:
            letter = await show(client, seq)
        except NotFoundError:
            continue  # purged one by one
        if consumer is None or letter.consumer == consumer:
            found.append(letter)
    return found


async def show(client: Client, seq: int) -> DeadLetter:
    msg = await client.jetstream().get_msg(DEAD_LETTERS.name, seq)
    return parse(seq, msg.subject, dict(msg.headers or {}), msg.data or b"")


async def redrive(client: Client, letter: DeadLetter) -> str:
    """Publish the original again on its subject, then delete the dead letter; returns the new message id.

    The copy is a new stream message, so every consumer of the subject sees it; they apply by business key (a run
    id, a submission id) and so change nothing twice. Only the consumer that failed it had anything left to do.
    """
    js = client.jetstream()
    subject, data, headers = letter.subject, letter.data, {}
    if letter.from_advisory or not data:
        original = await js.get_msg(EVENTS.name, letter.stream_seq)
        subject, data, headers = original.subject, original.data, dict(original.headers or {})
    message_id = f"redrive:{DEAD_LETTERS.name}:{letter.seq}"
    headers.update({MSG_ID_HEADER: message_id, "Kb-Redriven-From": str(letter.seq)})
    await js.publish(subject, data, headers=headers, stream=EVENTS.name)
    await js.delete_msg(DEAD_LETTERS.name, letter.seq)
    return message_id


async def purge(client: Client, letters: list[DeadLetter]) -> int:
    js = client.jetstream()
    for letter in letters:
        await js.delete_msg(DEAD_LETTERS.name, letter.seq)
    return len(letters)
