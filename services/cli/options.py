"""What the operator commands share: their URL options, where those default from, and how they fail."""

from __future__ import annotations

from typing import Annotated

import typer

NatsUrl = Annotated[str, typer.Option(help="NATS URL (default: KB_NATS_URL)")]
DatabaseUrl = Annotated[str, typer.Option(help="Postgres URL (default: KB_DATABASE_URL)")]


def urls(nats_url: str | None = None, database_url: str | None = None) -> tuple[str, str]:
    from services.kit.settings import ServiceSettings

    settings = ServiceSettings()
    return nats_url or settings.nats_url, database_url or settings.database_url


def fail(message: str) -> typer.Exit:
    typer.echo(f"Error: {message}", err=True)
    return typer.Exit(1)
