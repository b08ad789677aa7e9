"""The ledger's one consumer: every event, in stream order, into the archive and the read model."""

from __future__ import annotations

from typing import Any

from faststream import Context
from faststream.nats import NatsRouter

from services.kit.consumer import Kit
from services.kit.runtime import ordered_batch_consumer
from services.ledger import repository

router = NatsRouter()

PROJECT_ALL = "ledger-project"


async def _apply(conn, seq, event) -> None:
    await repository.archive(conn, seq, event)
    await repository.project(conn, seq, event)


@router.subscriber("evt.>", **ordered_batch_consumer(PROJECT_ALL), title=PROJECT_ALL,
                   description="Every event of the catalogue (schemas.events), projected in stream order.")
async def project_events(body: list[Any], kit: Kit = Context("kit"), message: Any = Context("message")) -> None:
    # A batch is applied in stream order in one transaction: projections see events in the order they happened.
    await kit.handle_batch(message.raw_message, _apply)
