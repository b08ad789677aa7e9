"""Replicas of a service start at once and race to create their shared durable push consumer. With a random inbox
as the delivery subject, the race made a replica die of `consumer name already in use` (seen in
tests/operate/test_scale_out.py), or left the consumer delivering to one replica's private inbox, so that it stalled
once that replica stopped. Real NATS, real FastStream brokers."""

from __future__ import annotations

import asyncio
import uuid

from faststream.nats import NatsBroker, NatsRouter

from services.kit.bus import declare_streams, make_broker
from services.kit.runtime import durable_consumer


def replica(nats_url: str, durable: str, seen: list[str]) -> NatsBroker:
    broker = make_broker(nats_url)
    router = NatsRouter()

    @router.subscriber(f"evt.race.{durable}", **durable_consumer(durable, workers=1))
    async def handle(body: str) -> None:
        seen.append(body)

    broker.include_router(router)
    return broker


async def test_any_replica_left_running_receives_from_the_shared_push_consumer(nats_url):
    for survivor in range(3):
        durable = f"kit-race-{uuid.uuid4().hex[:8]}"
        seen: list[list[str]] = [[], [], []]
        brokers = [replica(nats_url, durable, seen[i]) for i in range(3)]
        await asyncio.gather(*(broker.connect() for broker in brokers))  # then all subscribe at the same moment
        await declare_streams(brokers[0])
        try:
            await asyncio.gather(*(broker.start() for broker in brokers))
        except BaseException:
            await asyncio.gather(*(broker.stop() for broker in brokers))
            raise
        try:
            await asyncio.gather(*(broker.stop() for i, broker in enumerate(brokers) if i != survivor))
            await brokers[survivor].publish("after", f"evt.race.{durable}", stream="EVENTS")
            for _ in range(250):
                if seen[survivor]:
                    break
                await asyncio.sleep(0.02)
            assert seen[survivor] == ["after"], f"replica {survivor} of 3 left running received {seen}"
        finally:
            await brokers[survivor].stop()
