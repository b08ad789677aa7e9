"""What counts as an outage of Postgres or NATS (a restart, a failover, a full pool), for every service.

The message or request that met one is fine: consumers wait it out, the gateway answers 503 with Retry-After.
"""

from __future__ import annotations


def outage_types() -> tuple[type[BaseException], ...]:
    import asyncpg
    from nats import errors as nats_errors

    return (OSError, TimeoutError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError,
            asyncpg.exceptions.OperatorInterventionError, asyncpg.exceptions.TooManyConnectionsError,
            nats_errors.ConnectionClosedError, nats_errors.TimeoutError, nats_errors.NoServersError,
            nats_errors.NoRespondersError)


def is_outage(exc: BaseException) -> bool:
    """True for an outage, also when a task group wrapped it (every exception of the group must be one)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(is_outage(inner) for inner in exc.exceptions)
    return isinstance(exc, outage_types())
