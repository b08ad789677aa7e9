"""The ledger's one consumer: every event, in stream order, into the archive and the read model."""

from __future__ import annotations

from typing import Any

from faststream.nats import NatsRouter

from schemas.ledger_position import LEDGER_CONSUMER
from services.kit.consumer import KitSlot
from services.kit.runtime import ordered_batch_consumer
from services.ledger import repository

router = NatsRouter()
kit: KitSlot[None] = KitSlot(None)

PROJECT_ALL = LEDGER_CONSUMER  # the front ends read the ledger's position from its tracking rows
# Short, since a restarted ledger waits this long for what its predecessor held (services/kit/leader.py).
LEDGER_ACK_WAIT_S = 10.0
# Events per transaction at most. Behind (a burst, a restart), each batch pays its commit and one round trip per
# statement once for up to this many events; idle, a batch closes after the linger whatever its size.
LEDGER_BATCH = 1000


async def _apply(conn, events) -> None:
    await repository.project_batch(conn, events)


@router.subscriber("evt.>", **ordered_batch_consumer(PROJECT_ALL, ack_wait_s=LEDGER_ACK_WAIT_S,
                                                       batch_size=LEDGER_BATCH), title=PROJECT_ALL,
                   description="Every event of the catalogue (schemas.events), projected in stream order.")
async def project_events(body: list[Any]) -> None:
    # A batch is applied in stream order in one transaction: projections see events in the order they happened.
    await kit().handle_batch(_apply)
