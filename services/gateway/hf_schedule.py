"""The schedule of the open-data export, as upstream KernelBot runs it: the boards of active competitions (not
`-dev`, not practice boards) to the private data set as `active_submissions.parquet`, every KB_HF_EXPORT_EVERY_H
hours (6 by default) whenever a token and a private data set are configured. Any gateway replica may run it: a
transaction-scoped advisory lock and the time of the last export make one of them export per interval."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import asyncpg

from services.core.opendata import dataset, hf_export
from services.core.readmodel import dataset_reads, operator_reads

log = logging.getLogger("kernelbot.export")
FILENAME = dataset.SCHEDULED_FILENAME
RETRY_AFTER = timedelta(minutes=5)  # after a failed export, at most this long before the next try
CHECK_EVERY_S = 10.0  # a lock and one query per replica


class ExportSchedule:
    def __init__(self, pool: asyncpg.Pool, settings) -> None:
        self.pool, self.settings = pool, settings
        self.every = timedelta(hours=settings.hf_export_every_h)
        self._task: asyncio.Task | None = None

    @staticmethod
    def wanted(settings) -> bool:
        """Whether this deployment exports on a schedule: an interval, a token and a private data set."""
        token = settings.hf_token.get_secret_value() if settings.hf_token else ""
        return settings.hf_export_every_h > 0 and bool(token) and bool(settings.hf_private_dataset)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="hf-export-schedule")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        pause = max(1.0, min(CHECK_EVERY_S, self.every.total_seconds() / 4))
        while True:
            try:
                await self.tick()
            except Exception:  # noqa: BLE001 - the next tick tries again; the error is in hf_exports and the log
                log.exception("scheduled export failed")
            await asyncio.sleep(pause)

    async def tick(self) -> bool:
        """Export when due and no other replica is exporting; True when this call exported."""
        async with self.pool.acquire() as conn, conn.transaction():
            if not await operator_reads.take_export_lock(conn):
                return False
            now = datetime.now(UTC)
            succeeded, tried = await operator_reads.last_export(conn)
            if succeeded is not None and now - succeeded < self.every:
                return False
            if tried is not None and now - tried < min(self.every, RETRY_AFTER):
                return False  # failed a moment ago: not again at every check
            boards = dataset.active_competitions(await dataset_reads.boards(conn), now)
            ids = [board["id"] for board in boards]
            if not ids:
                return False  # no competition running
            repo_id = self.settings.hf_private_dataset
            try:
                done = await hf_export.export_to_hub(self.pool, self.settings, ids, FILENAME, private=True)
            except (hf_export.ExportRefused, hf_export.ExportNotConfigured, hf_export.ExportFailed) as exc:
                await operator_reads.record_export(conn, repo_id, FILENAME, 0, str(exc)[:500])
                raise
            await operator_reads.record_export(conn, done.repo_id, FILENAME, done.rows, None)
            log.info("exported %s rows of %s leaderboards to %s", done.rows, len(ids), done.repo_id)
            return True
