"""The ledger service: wiring only."""

from __future__ import annotations

from faststream import FastStream

from services.kit.runtime import consumer_app
from services.kit.settings import ServiceSettings
from services.ledger.handlers import kit, router


def create_app(settings: ServiceSettings | None = None) -> FastStream:
    return consumer_app("kernelbot-ledger", router, kit, settings or ServiceSettings())
