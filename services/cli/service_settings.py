"""Each service's settings class by the name `kernelbot serve` knows the service by: the one list of them all, for
the CLI, the spec exporters (scripts/) and the deployment checks. Each class lives beside its service
(services/<service>/settings.py); a service without its own settings (the ledger) has the kit's ServiceSettings.
Imported when asked for, so that `kernelbot --help` stays quick."""

from __future__ import annotations

from services.kit.settings import ServiceSettings


def settings_classes() -> dict[str, type[ServiceSettings]]:
    from services.discord.settings import DiscordSettings
    from services.dispatcher.settings import DispatcherSettings
    from services.gateway.settings import GatewaySettings
    from services.scorer.settings import ScorerSettings

    return {"gateway": GatewaySettings, "dispatcher": DispatcherSettings, "scorer": ScorerSettings,
            "ledger": ServiceSettings, "discord": DiscordSettings}


def settings_class(service: str) -> type[ServiceSettings]:
    """The settings class of `service`; the kit's ServiceSettings for one without its own."""
    return settings_classes().get(service, ServiceSettings)
