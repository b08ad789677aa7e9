"""The broker, the stream declarations and message encoding, shared by every service."""

from __future__ import annotations

import asyncio
import logging

from faststream.nats import JStream, NatsBroker
from nats.errors import ConnectionClosedError, ConnectionReconnectingError
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType

from schemas.envelope import Event
from schemas.events import BY_SUBJECT
from schemas.streams import ALL_STREAMS, EVENTS, StreamSpec

MSG_ID_HEADER = "Nats-Msg-Id"


def _stream_settings(spec: StreamSpec) -> dict:
    """The settings of one of our streams, as both FastStream and nats-py name them."""
    return {
        "name": spec.name,
        "subjects": list(spec.subjects),
        "storage": StorageType.FILE,
        "duplicate_window": spec.duplicate_window_s,
        "max_msg_size": spec.max_msg_size,
        "max_age": spec.max_age_s or None,
        "retention": RetentionPolicy(spec.retention),
        "max_bytes": spec.max_bytes,
        "max_msgs_per_subject": spec.max_msgs_per_subject,
        "discard": DiscardPolicy(spec.discard),
    }


def jstream(spec: StreamSpec = EVENTS) -> JStream:
    """The FastStream view of one of our streams; declare_streams() is the one place streams are created."""
    return JStream(**_stream_settings(spec), declare=False)


def _patch_fetch_timeout() -> None:
    """nats-py's pull fetch raises asyncio.TimeoutError where FastStream catches nats.errors.TimeoutError.

    Uncaught, it kills FastStream's consume task mid-batch, and the messages it had fetched wait a whole ack_wait
    before redelivery. Re-raising as the nats error lets FastStream treat it as the idle timeout it is.
    """
    from nats import errors
    from nats.js.client import JetStreamContext

    fetch = JetStreamContext.PullSubscription.fetch
    if getattr(fetch, "_kernelbot_patched", False):
        return

    async def fetch_with_nats_timeout(self, *args, **kwargs):
        try:
            return await fetch(self, *args, **kwargs)
        except errors.TimeoutError:
            raise
        except TimeoutError as exc:
            raise errors.TimeoutError from exc

    # patching nats-py's class on purpose (see above), which the type checker rightly flags
    fetch_with_nats_timeout._kernelbot_patched = True  # type: ignore[attr-defined]
    JetStreamContext.PullSubscription.fetch = fetch_with_nats_timeout  # type: ignore[method-assign]


def make_broker(url: str, *, middlewares: tuple = (), log_level: str = "WARNING") -> NatsBroker:
    _patch_fetch_timeout()
    logger = logging.getLogger("kernelbot.bus")
    logger.setLevel(log_level)
    return NatsBroker(
        url,
        middlewares=middlewares,
        logger=logger,
        log_level=logging.DEBUG,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,  # type: ignore[arg-type]  # seconds, a float in nats-py; FastStream says int
    )


async def stop_broker(broker: NatsBroker) -> None:
    """Stop a broker, its connection to NATS included, even while NATS is away. FastStream's stop drains the
    connection, which nats-py refuses while it reconnects; the connection is then closed without draining (there
    is no server to flush to), so the process can go on releasing what it holds after it."""
    try:
        await broker.stop()
    except (ConnectionReconnectingError, ConnectionClosedError):
        connection = await broker.connect()  # the connection that refused to drain: connect() returns the one held
        if not connection.is_closed:
            await connection.close()


async def declare_streams(broker: NatsBroker) -> None:
    """Create or update our streams. Only this function declares them, so settings never diverge."""
    from nats.js.api import StreamConfig
    from nats.js.errors import NotFoundError

    js = broker.connection.jetstream()
    for spec in ALL_STREAMS:
        config = StreamConfig(**_stream_settings(spec))
        try:
            await js.stream_info(spec.name)
            await js.update_stream(config)
        except NotFoundError:
            await js.add_stream(config)


def document_publishers(registrar, service: str, events) -> None:
    """Declare what a service emits, for its AsyncAPI document. Publishing itself goes through the outbox."""
    for event in events:
        title = f"{service}-{event.subject.removeprefix('evt.').replace('.', '-')}"
        registrar.publisher(event.subject, stream=jstream(), schema=event, title=title)


def encode(event: Event) -> bytes:
    return event.model_dump_json().encode()


class UnknownSubject(ValueError):
    """A message on a subject no event type is published on: malformed, like a body that does not validate."""


def decode(subject: str, data: bytes) -> Event:
    """Parse an event by its subject; raises UnknownSubject for an unknown subject, ValidationError for bad data."""
    kind = BY_SUBJECT.get(subject)
    if kind is None:
        raise UnknownSubject(f"no event type is published on {subject!r}")
    return kind.model_validate_json(data)


PUBLISH_ACK_TIMEOUT_S = 5.0
PUBLISH_ATTEMPTS = 3


class PublishFailed(Exception):
    """The stream did not acknowledge an event; the caller decides how to tell its client."""


async def publish(broker: NatsBroker, event: Event) -> int:
    """Publish one event and wait for the stream's acknowledgement (direct publishing outside the outbox); returns
    its stream sequence (for a duplicate, the sequence of the copy the stream kept).

    A retry after a lost acknowledgement is safe: the fixed message id makes the stream drop the copy.
    """
    for attempt in range(1, PUBLISH_ATTEMPTS + 1):
        try:
            ack = await broker.publish(
                encode(event), event.subject, headers={MSG_ID_HEADER: event.message_id}, stream=EVENTS.name,
                timeout=PUBLISH_ACK_TIMEOUT_S,
            )
            return ack.seq
        except Exception as exc:  # noqa: BLE001 - timeouts and lost connections alike
            if attempt == PUBLISH_ATTEMPTS:
                raise PublishFailed(f"{event.subject} was not acknowledged: {exc!r}") from exc
            await asyncio.sleep(0.1 * attempt)
    raise AssertionError("unreachable: the last attempt returns or raises")


async def publish_all(nats_url: str, events) -> None:
    """Publish events from outside a service (the CLI, tests, benchmarks), each acknowledged by the stream."""
    import nats

    client = await nats.connect(nats_url)
    try:
        js = client.jetstream()
        for event in events:
            await js.publish(event.subject, encode(event), headers={MSG_ID_HEADER: event.message_id},
                             stream=EVENTS.name, timeout=PUBLISH_ACK_TIMEOUT_S)
    finally:
        await client.close()
