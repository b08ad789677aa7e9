"""The gateway: FastAPI for clients, publishing events and reading the read model. Wiring only."""

from __future__ import annotations

import gc
from contextlib import asynccontextmanager

from fastapi import FastAPI

from schemas.auth_events import OAuthUserRegistered, WebAuthIdSet
from schemas.events import CliUserRegistered, SubmissionDeleted, SubmissionReceived
from schemas.policy_events import POLICY_EVENTS
from schemas.precheck_events import PrecheckCleared
from schemas.version import platform_version
from services.core.infrastructure.position import LedgerPosition
from services.gateway import errors, openapi
from services.gateway.hf_schedule import ExportSchedule
from services.gateway.hot_polls import HotPolls
from services.gateway.hot_reads import HotRankings
from services.gateway.long_poll import PollMemory
from services.gateway.middleware import CollapseLeadingSlashes, LimitRequestBody
from services.gateway.ratelimit import Limits
from services.gateway.routes import (
    admin,
    admin_problems,
    auth,
    health,
    leaderboards,
    pages,
    profile,
    runner_payloads,
    stream,
    submissions,
    user,
)
from services.gateway.settings import GatewaySettings
from services.gateway.standings_cache import StandingsCache
from services.gateway.waiter import ProjectionWaiter
from services.kit import metrics
from services.kit.bus import declare_streams, document_publishers, make_broker
from services.kit.db import apply_migrations, create_pool
from services.kit.ride_out import through_outage


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    settings = settings or GatewaySettings()
    broker = make_broker(settings.nats_url, log_level=settings.log_level)
    document_publishers(broker, "gateway", (SubmissionReceived, SubmissionDeleted, CliUserRegistered,
                                             OAuthUserRegistered, WebAuthIdSet, *POLICY_EVENTS, PrecheckCleared))
    document_publishers(broker, "gateway", admin_problems.PUBLISHES)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        apply_migrations(settings.database_url)
        # no session state is ever set on a pooled connection (the LISTENs have their own): no reset per release
        app.state.pool = await create_pool(settings.database_url, settings.pool_size, reset_sessions=False)
        await through_outage(broker.start, "connecting to NATS")
        await through_outage(lambda: declare_streams(broker), "declaring the streams")
        app.state.waiter = ProjectionWaiter()
        await app.state.waiter.start(settings.database_url)
        app.state.position = LedgerPosition()
        await app.state.position.start(settings.database_url, app.state.pool)
        schedule = ExportSchedule(app.state.pool, settings) if ExportSchedule.wanted(settings) else None
        if schedule is not None:
            schedule.start()
        app.state.poll_memory = PollMemory()
        app.state.standings_cache = StandingsCache()
        await app.state.standings_cache.start(settings.database_url)
        # Everything loaded so far (modules, the app, pydantic's schemas) lives as long as the process: out of the
        # collector's sight, so a full collection under load scans only what requests made, not the whole heap.
        gc.freeze()
        try:
            yield
        finally:
            await app.state.standings_cache.stop()
            if schedule is not None:
                await schedule.stop()
            await app.state.position.stop()
            await app.state.waiter.stop()
            await broker.stop()
            await app.state.pool.close()

    app = FastAPI(title="KernelBot", version=platform_version(), lifespan=lifespan,
                  description="popcorn-cli compatible API of KernelBot (docs/http-api.md).")
    app.state.settings = settings
    app.state.broker = broker
    app.state.limits = Limits(settings)
    errors.install(app)
    # Fixed routes first: the streaming submit's three free segments come last (docs/http-api.md "Names").
    app.include_router(admin_problems.router)  # fixed /admin paths, before the streaming catch-all
    for module in (health, leaderboards, submissions, user, admin, auth, pages, runner_payloads, profile, stream):
        app.include_router(module.router)
    openapi.install(app)
    # Outermost last: slashes are collapsed and NUL refused before the body limit and routing see the request.
    app.add_middleware(HotPolls)  # likewise for popcorn-cli's poll of a submission that is not held
    app.add_middleware(HotRankings)  # innermost: sees the cleaned URL, and only ever answers a public ranking
    app.add_middleware(LimitRequestBody)
    app.add_middleware(CollapseLeadingSlashes)
    metrics.install_http(app)  # /metrics, /ready and request latency by route, outermost
    return app
