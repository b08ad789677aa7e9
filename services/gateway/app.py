"""The gateway: FastAPI for clients, publishing events and reading the read model. Wiring only."""

from __future__ import annotations

import gc
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from schemas.auth_events import OAuthUserRegistered, WebAuthIdSet, WebsiteUserSignedIn
from schemas.events import CliUserRegistered, SubmissionDeleted, SubmissionReceived
from schemas.policy_events import POLICY_EVENTS
from schemas.precheck_events import PrecheckCleared
from schemas.version import platform_version
from services.gateway.edge import errors, openapi
from services.gateway.edge.middleware import CollapseLeadingSlashes, LimitRequestBody
from services.gateway.edge.ratelimit import Limits
from services.gateway.fastpaths import polls
from services.gateway.fastpaths.base import FastPathFront
from services.gateway.fastpaths.board_pages import BoardPageFastPath
from services.gateway.fastpaths.polls import PollFastPath
from services.gateway.fastpaths.rankings import RankingFastPath
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
from services.gateway.state import GatewayState, web_key
from services.kit import metrics
from services.kit.bus import document_publishers, make_broker


class Gateway(FastAPI):
    """FastAPI with the fast paths in front of its whole middleware stack (fastpaths/base.py says why)."""

    front: FastPathFront | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.front is not None and await self.front.answered(scope, send):
            return
        await super().__call__(scope, receive, send)


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    settings = settings or GatewaySettings()
    broker = make_broker(settings.nats_url, log_level=settings.log_level)
    document_publishers(broker, "gateway", (SubmissionReceived, SubmissionDeleted, CliUserRegistered,
                                             OAuthUserRegistered, WebAuthIdSet, WebsiteUserSignedIn, *POLICY_EVENTS,
                                             PrecheckCleared))
    document_publishers(broker, "gateway", admin_problems.PUBLISHES)
    state = GatewayState(settings=settings, broker=broker, limits=Limits(settings), web_key=web_key(settings))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await state.start()
        # Everything loaded so far (modules, the app, pydantic's schemas) lives as long as the process: out of the
        # collector's sight, so a full collection under load scans only what requests made, not the whole heap.
        gc.freeze()
        try:
            yield
        finally:
            await state.stop()

    app = Gateway(title="KernelBot", version=platform_version(), lifespan=lifespan,
                  description="popcorn-cli compatible API of KernelBot (docs/http-api.md).")
    app.state.gateway = state  # read only by services/gateway/deps.py
    errors.install(app)
    # Fixed routes first: the streaming submit's three free segments come last (docs/http-api.md "Names").
    app.include_router(admin_problems.router)  # fixed /admin paths, before the streaming catch-all
    for router in (health.router, leaderboards.router, submissions.router, polls.router, user.router, admin.router,
                   auth.router, pages.router, runner_payloads.router, profile.router, stream.router):
        app.include_router(router)
    openapi.install(app)
    # A public ranking, its web page for who is not signed in, and popcorn-cli's poll of a submission that is not
    # held, before anything else.
    app.front = FastPathFront(state, [RankingFastPath(state), BoardPageFastPath(state), PollFastPath(state)])
    # Outermost last: slashes are collapsed and NUL refused before the body limit and routing see the request.
    app.add_middleware(LimitRequestBody)
    app.add_middleware(CollapseLeadingSlashes)
    metrics.install_http(app, state.dependencies_answer)  # /metrics, /ready and request latency by route, outermost
    return app
