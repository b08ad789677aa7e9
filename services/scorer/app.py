"""The scorer service: wiring only."""

from __future__ import annotations

from faststream import FastStream

from services.kit.consumer import Kit
from services.kit.runtime import consumer_app
from services.scorer.handlers import ScorerConfig, kit, router
from services.scorer.settings import ScorerSettings


def create_app(settings: ScorerSettings | None = None) -> FastStream:
    settings = settings or ScorerSettings()

    async def started(started_kit: Kit) -> None:
        kit.fill(started_kit, ScorerConfig(settings.same_hardware, settings.development_mode, settings.floor_rules()))

    return consumer_app("kernelbot-scorer", router, kit, settings, on_started=started)
