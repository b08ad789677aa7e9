"""Start-up and shutdown shared by the services: migrations, pool, streams, outbox relay, consumer settings."""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Awaitable, Callable

from faststream import AckPolicy, FastStream
from faststream.nats import NatsBroker, NatsRouter, PullSub
from faststream.specification import AsyncAPI
from nats.js.api import ConsumerConfig, DeliverPolicy

from schemas.streams import EVENTS, StreamSpec
from schemas.version import platform_version
from services.kit import metrics
from services.kit.bus import declare_streams, jstream, make_broker
from services.kit.consumer import Kit, KitSlot
from services.kit.db import apply_migrations, create_pool
from services.kit.deadletter import JETSTREAM_MAX_DELIVER, DeadLetterMiddleware
from services.kit.outbox import OutboxRelay
from services.kit.ride_out import patient_subscriptions, through_outage
from services.kit.settings import ServiceSettings

log = logging.getLogger("kernelbot")

# FastStream warns about every durable push consumer; ours are bound to a queue group (deliver group), which is
# exactly what lets replicas share one.
warnings.filterwarnings("ignore", message="The JetStream Push consumer with the `durable` option", category=RuntimeWarning)

# Where a push consumer delivers. Named after the consumer, not a random inbox of whichever replica created it: replicas
# that start at once then send the same definition (creating it twice is a no-op, not `consumer name already in
# use`), and every replica listens where the consumer delivers, so it never stalls with its creator gone.
DELIVER_PREFIX = "_INBOX.kb-deliver"


def _consumer_config(durable: str, ack_wait_s: float, max_ack_pending: int = 10_000,
                     deliver_subject: str | None = None) -> ConsumerConfig:
    return ConsumerConfig(
        durable_name=durable,
        deliver_subject=deliver_subject,
        ack_wait=ack_wait_s,
        max_deliver=JETSTREAM_MAX_DELIVER,
        deliver_policy=DeliverPolicy.ALL,
        max_ack_pending=max_ack_pending,
    )


def durable_consumer(durable: str, *, ack_wait_s: float = 10.0, workers: int = 16,
                     stream: StreamSpec = EVENTS) -> dict:
    """Subscriber arguments for a durable consumer named `<service>-<handler>`, acked by the kit.

    Push delivery to a queue group: messages arrive as soon as they are stored (a pull fetch waits to fill its
    batch), replicas share the consumer, and `workers` handlers run at once in each replica.
    """
    return {
        "stream": jstream(stream),
        "durable": durable,
        "queue": durable,
        "config": _consumer_config(durable, ack_wait_s, deliver_subject=f"{DELIVER_PREFIX}.{durable}"),
        "ack_policy": AckPolicy.MANUAL,
        "max_workers": workers,
    }


async def undecoded_batch(message) -> list[bytes]:
    """The bodies of a batch as they came: the kit decodes each event once, into its own model
    (services.kit.bus.decode); FastStream's default decoder would parse every body as JSON first, for nothing."""
    return list(message.body)


def ordered_batch_consumer(durable: str, *, ack_wait_s: float = 30.0, batch_size: int = 256,
                           linger_s: float = 0.01) -> dict:
    """Subscriber arguments for a consumer that applies messages in stream order, in batches.

    A pull fetch waits until its batch is full or `linger_s` has passed, so under load one transaction takes many
    messages, and when idle a message waits at most `linger_s`.
    """
    return {
        "stream": jstream(),
        "durable": durable,
        "pull_sub": PullSub(batch_size=batch_size, timeout=linger_s, batch=True),
        # At most one full batch out at a time. A process that stopped holding a partial batch leaves room for
        # later messages, so a consumer that needs stream order across a restart starts only once what it held is
        # redelivered (services.kit.leader.await_redeliveries; the ledger and the Discord bot do).
        "config": _consumer_config(durable, ack_wait_s, max_ack_pending=batch_size),
        "ack_policy": AckPolicy.MANUAL,
        "decoder": undecoded_batch,
    }


def service_broker(settings: ServiceSettings) -> NatsBroker:
    return make_broker(settings.nats_url, middlewares=(DeadLetterMiddleware,), log_level=settings.log_level)


async def start_kit(broker: NatsBroker, settings: ServiceSettings) -> Kit:
    """Prepare everything a consumer needs before its subscriptions start; the steps that need NATS, the
    subscriptions' creation included, wait through an outage (services.kit.ride_out)."""
    await asyncio.to_thread(apply_migrations, settings.database_url)
    # handlers keep to transaction-scoped state (SET LOCAL, xact locks): no reset round trip per transaction
    pool = await create_pool(settings.database_url, settings.pool_size, reset_sessions=False)
    await through_outage(broker.connect, "connecting to NATS")
    await through_outage(lambda: declare_streams(broker), "declaring the streams")
    patient_subscriptions(broker)
    relay = OutboxRelay(pool, broker.connection.jetstream())
    relay.start()
    return Kit(pool=pool, relay=relay)


async def stop_kit(kit: Kit) -> None:
    await kit.relay.stop()
    await kit.pool.close()


Hook = Callable[[Kit], Awaitable[object]]


def consumer_app(title: str, router: NatsRouter, slot: KitSlot, settings: ServiceSettings, *,
                 broker: NatsBroker | None = None, on_started: Hook | None = None,
                 on_stopping: Hook | None = None) -> FastStream:
    """A FastStream app for one service: its router, the kit started before subscriptions, stopped after."""
    broker = broker or service_broker(settings)
    broker.include_router(router)
    app = FastStream(broker, specification=AsyncAPI(title=title, version=platform_version()))
    state: dict = {}

    @app.on_startup
    async def startup() -> None:
        state["kit"] = await start_kit(broker, settings)
        slot.fill(state["kit"])
        state["observer"] = metrics.observer(broker, state["kit"], settings, title)
        await state["observer"].start()
        if on_started:
            await on_started(state["kit"])

    @app.on_shutdown
    async def shutdown() -> None:
        if "observer" in state:
            await state.pop("observer").stop()
        if "kit" in state:
            if on_stopping:
                await on_stopping(state["kit"])
            await stop_kit(state["kit"])
            slot.fill(None)

    return app
