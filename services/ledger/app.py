"""The ledger service: wiring only."""

from __future__ import annotations

from faststream import FastStream

from services.kit.runtime import consumer_app
from services.kit.settings import ServiceSettings
from services.ledger.handlers import router


def create_app(settings: ServiceSettings | None = None) -> FastStream:
    return consumer_app("kernelbot-ledger", router, settings or ServiceSettings())
