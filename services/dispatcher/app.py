"""The dispatcher service: wiring only."""

from __future__ import annotations

import socket

from faststream import FastStream

from services.dispatcher import repository
from services.dispatcher.backends.agent import AgentJobs, declare_job_consumers
from services.dispatcher.backends.carry import PayloadLinks
from services.dispatcher.backends.registry import build_lanes
from services.dispatcher.catalogue import build_catalogue
from services.dispatcher.handlers import DispatchConfig, kit, router
from services.dispatcher.rerun import router as rerun_router
from services.dispatcher.scheduler import Scheduler
from services.dispatcher.settings import DispatcherSettings
from services.kit.consumer import Kit
from services.kit.runtime import consumer_app, service_broker

router.include_router(rerun_router)  # rejudge --rerun: fresh runs of ranked submissions


def create_app(settings: DispatcherSettings | None = None) -> FastStream:
    settings = settings or DispatcherSettings()
    # A broken catalogue stops the service at start, with the entry and field at fault, before it takes work.
    catalogue = build_catalogue(settings.gpu_catalogue, settings.local_gpus, settings.null_gpus,
                                {"repository": settings.github_repository, "ref": settings.github_ref})
    owner = settings.worker_id or f"{socket.gethostname()}-dispatcher"
    broker = service_broker(settings)
    state: dict = {}

    async def started(started_kit: Kit) -> None:
        kit.fill(started_kit, DispatchConfig(settings.launch_allowance_s,
                                             {gpu: e.runners for gpu, e in catalogue.gpus.items()}))
        await repository.announce_gpus(
            started_kit.pool,
            [(gpu, e.backend, e.target or ",".join(e.queues or e.runners), e.arch, e.concurrent_runs())
             for gpu, e in catalogue.gpus.items()],
            owner,
        )
        links = PayloadLinks(started_kit.pool, settings.payload_url, settings.payload_link_ttl_s) \
            if settings.payload_url else None
        js = broker.connection.jetstream()
        await declare_job_consumers(js, catalogue.agent_queues())
        lanes = build_lanes(catalogue, settings, links, AgentJobs(js, started_kit.pool))
        state["scheduler"] = Scheduler(
            started_kit, lanes, owner=owner, max_attempts=settings.max_attempts,
            database_url=settings.database_url, retry_backoff_s=settings.retry_backoff_s, lease_s=settings.lease_s,
        )
        await state["scheduler"].start()

    async def stopping(_: Kit) -> None:
        if "scheduler" in state:
            await state["scheduler"].stop()

    return consumer_app("kernelbot-dispatcher", router, kit, settings, broker=broker, on_started=started,
                        on_stopping=stopping)
