"""Everything one gateway process holds, in one typed object: made by create_app(), started and stopped by its
lifespan, and handed to routes by the dependencies of services/gateway/deps.py (and to the fast paths when they are
installed)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import asyncpg
from faststream.nats import NatsBroker

from services.core.infrastructure.position import LedgerPosition
from services.gateway.edge.ratelimit import Limits
from services.gateway.fastpaths.long_poll import PollMemory
from services.gateway.fastpaths.standings_cache import StandingsCache
from services.gateway.hf_schedule import ExportSchedule
from services.gateway.settings import GatewaySettings
from services.gateway.submitting.waiter import ProjectionWaiter
from services.kit import metrics_repository
from services.kit.bus import declare_streams, stop_broker
from services.kit.db import apply_migrations, create_pool
from services.kit.listener import Listener
from services.kit.ride_out import through_outage


def web_key(settings: GatewaySettings) -> bytes:
    """The key of sessions, form tokens and artifact links: the configured secret, else a random key made once for
    this process (then a cookie or a form of one replica means nothing to another)."""
    secret = settings.session_secret.get_secret_value() if settings.session_secret else ""
    return secret.encode() if secret else secrets.token_bytes(32)


@dataclass(eq=False)
class GatewayState:
    settings: GatewaySettings
    broker: NatsBroker
    limits: Limits
    web_key: bytes
    waiter: ProjectionWaiter = field(default_factory=ProjectionWaiter)
    position: LedgerPosition = field(default_factory=LedgerPosition)
    standings_cache: StandingsCache = field(default_factory=StandingsCache)
    poll_memory: PollMemory = field(default_factory=PollMemory)
    _pool: asyncpg.Pool | None = None
    _listener: Listener | None = None
    _schedule: ExportSchedule | None = None

    @property
    def started(self) -> bool:
        """Whether the lifespan opened the pool (an app driven without its lifespan answers from its routes only)."""
        return self._pool is not None

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("the gateway's lifespan has not started: no database pool")
        return self._pool

    async def dependencies_answer(self) -> bool:
        """Whether NATS and Postgres answer (GET /ready)."""
        connection = self.broker.connection
        return bool(connection and connection.is_connected) and self.started and await metrics_repository.ping(
            self.pool)

    async def start(self) -> None:
        settings = self.settings
        apply_migrations(settings.database_url)
        # no session state is ever set on a pooled connection (the LISTEN has its own): no reset per release
        self._pool = await create_pool(settings.database_url, settings.pool_size, reset_sessions=False)
        await through_outage(self.broker.start, "connecting to NATS")
        await through_outage(lambda: declare_streams(self.broker), "declaring the streams")
        # One LISTEN connection for every channel this process follows.
        self._listener = Listener(settings.database_url)
        self.waiter.subscribe(self._listener)
        self.position.subscribe(self._listener, self._pool)
        self.standings_cache.subscribe(self._listener)
        await self._listener.start()
        await self.position.catch_up()  # after LISTEN, so nothing announced in between is missed
        if ExportSchedule.wanted(settings):
            self._schedule = ExportSchedule(self._pool, settings)
            self._schedule.start()

    async def stop(self) -> None:
        try:
            await self.standings_cache.stop()
            if self._schedule is not None:
                await self._schedule.stop()
            await self.position.stop()
            self.waiter.stop()  # held polls are answered with what there is, not cut off
            if self._listener is not None:
                await self._listener.stop()
            await stop_broker(self.broker)
        finally:  # whatever failed above, a stopped replica must not keep its database connections
            if self._pool is not None:
                await self._pool.close()
