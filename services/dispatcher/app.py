"""The dispatcher service: wiring only."""

from __future__ import annotations

import socket
from pathlib import Path

from faststream import FastStream

from services.dispatcher.backends.local import LocalBackend
from services.dispatcher.backends.null import NullBackend
from services.dispatcher.handlers import LAUNCH_ALLOWANCE_KEY, kit, router
from services.dispatcher.scheduler import Scheduler
from services.kit.consumer import Kit
from services.kit.runtime import consumer_app
from services.kit.settings import DispatcherSettings


def build_backends(settings: DispatcherSettings) -> dict:
    runs_dir = Path(settings.runs_dir or Path.home() / ".kernelbot" / "runs")
    local = LocalBackend(runs_dir)
    backends = {gpu: (local, slots) for gpu, slots in settings.local_gpus.items()}
    null = NullBackend()
    # The null backend has no GPU to protect, so it takes many runs at once.
    backends.update({gpu: (null, 64) for gpu in settings.null_gpus})
    return backends


def create_app(settings: DispatcherSettings | None = None) -> FastStream:
    settings = settings or DispatcherSettings()
    state: dict = {}

    async def started(started_kit: Kit) -> None:
        started_kit.extras[LAUNCH_ALLOWANCE_KEY] = settings.launch_allowance_s
        state["scheduler"] = Scheduler(
            started_kit, build_backends(settings), owner=settings.worker_id or f"{socket.gethostname()}-dispatcher",
            max_attempts=settings.max_attempts, database_url=settings.database_url,
        )
        await state["scheduler"].start()

    async def stopping(_: Kit) -> None:
        if "scheduler" in state:
            await state["scheduler"].stop()

    return consumer_app("kernelbot-dispatcher", router, kit, settings, on_started=started, on_stopping=stopping)
