"""Reading a JetStream stream from a sequence number on, and writing into one, for operator tools."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

import nats
from nats.aio.client import Client
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from schemas.streams import EVENTS
from services.kit.bus import MSG_ID_HEADER, declare_streams

IDLE_S = 2.0


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    subject: str
    headers: dict[str, str]
    data: bytes
    time: datetime | None = None

    @property
    def message_id(self) -> str:
        return self.headers.get(MSG_ID_HEADER, "")

    def to_record(self) -> dict:
        """A JSON Lines record: the event itself when it is JSON, else its bytes in base64."""
        record: dict = {"seq": self.seq, "subject": self.subject, "msg_id": self.message_id,
                        "time": self.time.isoformat() if self.time else None, "headers": self.headers}
        try:
            record["data"] = json.loads(self.data)
        except (ValueError, UnicodeDecodeError):
            record["data_b64"] = base64.b64encode(self.data).decode()
        return record

    @classmethod
    def from_record(cls, record: dict) -> StoredMessage:
        if "data_b64" in record:
            data = base64.b64decode(record["data_b64"])
        else:
            # the same bytes an event's own encoding gives (pydantic writes compact JSON)
            data = json.dumps(record["data"], separators=(",", ":"), ensure_ascii=False).encode()
        headers = dict(record.get("headers") or {})
        if record.get("msg_id"):
            headers[MSG_ID_HEADER] = record["msg_id"]
        return cls(int(record["seq"]), record["subject"], headers, data)


@asynccontextmanager
async def connected(url: str) -> AsyncIterator[Client]:
    client = await nats.connect(url, connect_timeout=5, max_reconnect_attempts=3)
    try:
        yield client
    finally:
        await client.close()


async def stream_bounds(client: Client, stream: str = EVENTS.name) -> tuple[int, int, int]:
    """(first sequence, last sequence, message count); zeros for a stream that does not exist."""
    try:
        info = await client.jetstream().stream_info(stream)
    except NotFoundError:
        return 0, 0, 0
    return info.state.first_seq, info.state.last_seq, info.state.messages


async def read_stream(client: Client, *, stream: str = EVENTS.name, start_seq: int = 1, until_seq: int | None = None,
                      subject: str = ">", follow: bool = False, idle_s: float = IDLE_S) -> AsyncIterator[StoredMessage]:
    """Messages from `start_seq` on, in order: up to `until_seq` (default: the last one now), or forever with
    `follow` (until `idle_s` passes without a message when `idle_s` is positive)."""
    js = client.jetstream()
    if not follow:
        _, last, count = await stream_bounds(client, stream)
        until_seq = last if until_seq is None else min(until_seq, last)
        if count == 0 or until_seq < start_seq:
            return
    policy = DeliverPolicy.BY_START_SEQUENCE if start_seq > 0 else DeliverPolicy.NEW
    config = ConsumerConfig(deliver_policy=policy, opt_start_seq=start_seq if start_seq > 0 else None)
    sub = await js.subscribe(subject if subject != ">" else _all_subjects(stream), stream=stream,
                             ordered_consumer=True, config=config)
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=idle_s if idle_s > 0 else 3600)
            except (TimeoutError, nats.errors.TimeoutError):
                if follow and idle_s <= 0:
                    continue
                if follow:
                    return
                raise RuntimeError(f"stream {stream} stopped delivering before sequence {until_seq}") from None
            meta = msg.metadata
            yield StoredMessage(meta.sequence.stream, msg.subject, dict(msg.headers or {}), msg.data,
                                meta.timestamp)
            if not follow and meta.sequence.stream >= until_seq:
                return
    finally:
        await sub.unsubscribe()


async def read_subject(client: Client, subject: str, *, stream: str = EVENTS.name,
                       idle_s: float = IDLE_S) -> AsyncIterator[StoredMessage]:
    """Every message stored under `subject` (wildcards allowed), in order; ends after the last one. Unlike
    read_stream it does not wait for the stream's last sequence, which another subject may hold."""
    sub = await client.jetstream().subscribe(subject, stream=stream, ordered_consumer=True,
                                             config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL))
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=idle_s)
            except (TimeoutError, nats.errors.TimeoutError):
                return  # nothing stored under the subject: the server delivers a match at once
            meta = msg.metadata
            yield StoredMessage(meta.sequence.stream, msg.subject, dict(msg.headers or {}), msg.data, meta.timestamp)
            if meta.num_pending == 0:
                return
    finally:
        await sub.unsubscribe()


def _all_subjects(stream: str) -> str:
    return "evt.>" if stream == EVENTS.name else ">"


async def publish_stored(client: Client, message: StoredMessage, stream: str = EVENTS.name) -> bool:
    """Publish with the stored message id; False when the stream dropped it as a duplicate."""
    ack = await client.jetstream().publish(message.subject, message.data, headers=message.headers or None,
                                           stream=stream, timeout=10)
    return not ack.duplicate


async def ensure_streams(client: Client) -> None:
    """Declare our streams on a fresh server, through the one place that declares them."""
    from types import SimpleNamespace

    await declare_streams(SimpleNamespace(connection=client))


class ImportRefused(Exception):
    pass


async def import_messages(client: Client, messages: list[StoredMessage], *, resume: bool) -> tuple[int, int]:
    """Publish an exported log into the events stream; returns (stored, skipped).

    Only into an empty stream, so sequence numbers come out as they were. `resume` finishes an interrupted import:
    the stream must then hold a prefix of the file (checked by message id), and the rest is published.
    """
    await ensure_streams(client)
    _, _, count = await stream_bounds(client)
    if count and not resume:
        raise ImportRefused(f"the {EVENTS.name} stream holds {count} messages; import only into an empty stream "
                            "(or pass --resume to finish an interrupted import)")
    stored_ids = [m.message_id async for m in read_stream(client)] if count else []
    if stored_ids != [m.message_id for m in messages[:len(stored_ids)]]:
        raise ImportRefused(f"the {EVENTS.name} stream does not hold the start of this file; not resuming")
    stored = 0
    for message in messages[len(stored_ids):]:
        # the fixed message id makes a publish retried after a lost acknowledgement count once
        stored += await publish_stored(client, message)
    return stored, len(messages) - stored


def run(coroutine):
    return asyncio.run(coroutine)
