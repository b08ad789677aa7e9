"""The ledger's one consumer: every event, in stream order, into the archive and the read model."""

from __future__ import annotations

from typing import Any

from faststream import Context
from faststream.nats import NatsMessage, NatsRouter

from services.kit.consumer import Kit
from services.kit.runtime import durable_consumer
from services.ledger import repository

router = NatsRouter()

PROJECT_ALL = "ledger-project"


async def _apply(conn, seq, event) -> None:
    await repository.archive(conn, seq, event)
    await repository.project(conn, seq, event)


@router.subscriber("evt.>", **durable_consumer(PROJECT_ALL, batch_size=256), title=PROJECT_ALL)
async def project_event(body: Any, msg: NatsMessage, kit: Kit = Context("kit")) -> None:
    # One applier keeps stream order across the concurrent calls of a fetched batch and shares transactions.
    await kit.batcher(PROJECT_ALL, _apply).submit(msg.raw_message)
