"""The gateway: FastAPI for clients, publishing events and reading the read model. Wiring only."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI

from services.gateway import errors
from services.gateway.routes import admin, health, leaderboards, submissions
from services.gateway.waiter import ProjectionWaiter
from schemas.events import CliUserRegistered, SubmissionReceived
from services.kit.bus import declare_streams, document_publishers, make_broker
from services.kit.db import apply_migrations, create_pool
from services.kit.settings import GatewaySettings


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    settings = settings or GatewaySettings()
    broker = make_broker(settings.nats_url, log_level=settings.log_level)
    document_publishers(broker, "gateway", (SubmissionReceived, CliUserRegistered))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        apply_migrations(settings.database_url)
        app.state.pool = await create_pool(settings.database_url, settings.pool_size)
        await broker.start()
        await declare_streams(broker)
        app.state.waiter = ProjectionWaiter()
        await app.state.waiter.start(settings.database_url)
        try:
            yield
        finally:
            await app.state.waiter.stop()
            await broker.stop()
            await app.state.pool.close()

    app = FastAPI(title="KernelBot", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.broker = broker
    errors.install(app)
    for module in (health, leaderboards, submissions, admin):
        app.include_router(module.router)
    return app
