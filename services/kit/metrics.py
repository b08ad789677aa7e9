"""Prometheus metrics of every service, and what serves them with health and readiness (see status.py).

The kit's hooks call in here (handling a message, committing what a handler emits, an HTTP request); nothing here
connects or starts at import time. Metric names carry the `kb_` prefix.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Gauge, Histogram

from schemas.streams import EVENTS
from services.kit import metrics_repository, status
from services.kit.jsonlog import correlation

log = logging.getLogger("kernelbot.metrics")

EVENTS_HANDLED = Counter("kb_events_handled", "Messages handled by a consumer, by event subject and outcome",
                         ["consumer", "subject", "outcome"])
HANDLER_SECONDS = Histogram("kb_handler_seconds", "Time a consumer took to handle a message (or a batch)",
                            ["consumer", "subject"])
EVENTS_EMITTED = Counter("kb_events_emitted", "Events a service committed to its outbox, by type", ["type"])
RUNS = Counter("kb_runs", "Runs ended, by backend and outcome", ["backend", "outcome"])
CONSUMER_PENDING = Gauge("kb_consumer_pending", "Messages of the stream not yet delivered to a consumer (lag)",
                         ["consumer"])
CONSUMER_ACK_PENDING = Gauge("kb_consumer_ack_pending", "Messages delivered to a consumer and not yet acknowledged",
                             ["consumer"])
CONSUMER_REDELIVERED = Gauge("kb_consumer_redelivered", "Messages a consumer is being redelivered", ["consumer"])
QUEUE_DEPTH = Gauge("kb_queue_depth", "Runs in the durable run queue per GPU, by status", ["gpu", "status"])
STANDINGS_CACHE = Counter("kb_standings_cache", "Ranking answers of the gateway's standings cache, by outcome",
                          ["outcome"])
STANDINGS_RENDERS = Counter("kb_standings_renders", "Ranking bodies the gateway's standings cache rendered, by cause "
                            "(a request that found none; ahead, on the notification of a change)", ["cause"])
RATE_LIMITED = Counter("kb_rate_limited", "Requests the gateway refused with 429 by its own limits", ["limit"])
OPEN_STREAMS = Gauge("kb_open_streams", "SSE streams open on this gateway process")
HANDLER_ERRORS = Counter("kb_handler_errors", "Handler failures on well-formed events (bugs, not outages): alert on it",
                         ["consumer", "subject", "error"])
HTTP_SECONDS = Histogram("kb_http_request_seconds", "HTTP request latency by route", ["method", "route", "status"])

_CORRELATION = re.compile(rb'"correlation_id":"([^"]{0,64})"')
POLL_EVERY_S = 5.0


def _correlation_of(data: bytes) -> str:
    # the envelope's fields come first in an event's JSON: the head is enough
    found = _CORRELATION.search(data[:1024])
    return found.group(1).decode(errors="replace") if found else ""


@contextmanager
def handling(msg) -> Iterator[None]:
    """Around one FastStream message (single or batch): latency, outcome per subject, the log's correlation id."""
    raws = msg.raw_message if isinstance(msg.raw_message, list) else [msg.raw_message]
    if not raws:
        yield
        return
    try:
        consumer = raws[0].metadata.consumer
    except Exception:  # noqa: BLE001 - not a JetStream message
        consumer = "core"
    subject = raws[0].subject if len(raws) == 1 else "batch"
    token = correlation.set(_correlation_of(raws[0].data or b"")) if len(raws) == 1 else None
    started = time.perf_counter()
    outcome = "error"
    try:
        yield
        outcome = "ok"
    finally:
        HANDLER_SECONDS.labels(consumer, subject).observe(time.perf_counter() - started)
        for raw in raws:
            EVENTS_HANDLED.labels(consumer, raw.subject, outcome).inc()
        if token is not None:
            correlation.reset(token)


def handler_error(consumer: str, subject: str, exc: BaseException) -> None:
    HANDLER_ERRORS.labels(consumer, subject, type(exc).__name__).inc()


def emitted(events: Iterable) -> None:
    """Count what a transaction committed; runs are counted by backend and outcome as they end."""
    for event in events:
        kind = type(event).__name__
        EVENTS_EMITTED.labels(kind).inc()
        if kind == "RunCompleted":
            RUNS.labels(event.backend, "completed" if event.result.success else "runner_error").inc()
        elif kind == "RunFailed":
            RUNS.labels(getattr(event, "backend", "") or "-", event.reason).inc()


async def poll_consumers(js, stream: str, durables: list[str]) -> None:
    for durable in durables:
        try:
            info = await js.consumer_info(stream, durable)
        except Exception:  # noqa: BLE001 - not created yet, or the server is away: keep the last value
            continue
        CONSUMER_PENDING.labels(durable).set(info.num_pending or 0)
        CONSUMER_ACK_PENDING.labels(durable).set(info.num_ack_pending or 0)
        CONSUMER_REDELIVERED.labels(durable).set(info.num_redelivered or 0)


def set_queue_depth(rows: Iterable) -> None:
    QUEUE_DEPTH.clear()
    for row in rows:
        QUEUE_DEPTH.labels(row["gpu"], row["status"]).set(row["n"])


class Observer:
    """What a consumer service runs besides its handlers: the status server and the periodic gauges."""

    def __init__(self, broker, pool, *, port: int, stream: str, queue_depth: bool) -> None:
        self._repository = metrics_repository
        self._broker = broker
        self._pool = pool
        self._stream = stream
        self._queue_depth = queue_depth
        self._durables = [s.config.durable_name for s in broker.subscribers
                          if getattr(getattr(s, "config", None), "durable_name", None)]
        self._server = status.StatusServer(port, self.ready) if port else None
        self._task: asyncio.Task | None = None

    async def ready(self) -> bool:
        connection = self._broker.connection
        return bool(connection and connection.is_connected) and await self._repository.ping(self._pool)

    async def start(self) -> None:
        if self._server is not None:
            await self._server.start()
        self._task = asyncio.create_task(self._poll_forever(), name="metrics-poll")

    async def _poll_forever(self) -> None:
        while True:
            try:
                await poll_consumers(self._broker.connection.jetstream(), self._stream, self._durables)
                if self._queue_depth:
                    set_queue_depth(await self._repository.queue_depth(self._pool))
            except Exception:  # noqa: BLE001 - gauges keep their last values until the next poll
                log.debug("metrics poll failed", exc_info=True)
            await asyncio.sleep(POLL_EVERY_S)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._server is not None:
            await self._server.stop()


def observer(broker, kit, settings, title: str):
    return Observer(broker, kit.pool, port=getattr(settings, "metrics_port", 0), stream=EVENTS.name,
                    queue_depth=title.endswith("dispatcher"))


class HttpMetrics:
    """ASGI middleware timing each request by its route template (`/submissions/{leaderboard}/{gpu}`), never by
    the raw path, so a scan of made-up URLs cannot blow up the number of series."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def record_status(message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            HTTP_SECONDS.labels(scope.get("method", ""), route, str(status["code"])).observe(
                time.perf_counter() - started)


def install_http(app, dependencies_answer: Callable[[], Awaitable[bool]]) -> None:
    """The gateway's /metrics and /ready (left out of the OpenAPI document: they are for operators); ready while
    `dependencies_answer()` says NATS and Postgres answer."""
    from starlette.responses import Response

    async def ready() -> Response:
        return await status.readiness(dependencies_answer)

    app.add_api_route("/metrics", status.metrics_response, include_in_schema=False)
    app.add_api_route("/ready", ready, include_in_schema=False)
    app.add_middleware(HttpMetrics)
