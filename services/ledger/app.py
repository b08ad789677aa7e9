"""The ledger service: wiring only."""

from __future__ import annotations

from faststream import FastStream

from schemas.streams import EVENTS
from services.kit.leader import LeaderLock, await_redeliveries
from services.kit.runtime import consumer_app, service_broker
from services.kit.settings import ServiceSettings
from services.ledger.handlers import LEDGER_ACK_WAIT_S, PROJECT_ALL, kit, router


def create_app(settings: ServiceSettings | None = None) -> FastStream:
    settings = settings or ServiceSettings()
    # Replicas are standbys: projections need stream order, so one applies at a time (services/kit/leader.py).
    leader = LeaderLock(settings.database_url, PROJECT_ALL)
    broker = service_broker(settings)

    async def started(_kit) -> None:
        await leader.acquire()
        # what a dead predecessor held comes back first, so stream order survives its crash
        await await_redeliveries(broker.connection.jetstream(), EVENTS.name, PROJECT_ALL, LEDGER_ACK_WAIT_S + 5)

    return consumer_app("kernelbot-ledger", router, kit, settings, broker=broker, on_started=started,
                        on_stopping=lambda _: leader.release())
