"""The launch loop: claims queued runs per GPU within its slots, launches them and reports their ends.

Runs live in the durable queue (dispatch_runs) with a lease, so several dispatchers share the work and a run whose
dispatcher died is resumed by whoever claims it next, watching the job it already launched instead of starting it
again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from schemas.contracts import FullResult, RunPayload
from schemas.events import RunCompleted, RunDispatched, RunFailed, RunProgress, RunStarted
from services.dispatcher import repository
from services.dispatcher.backends.base import Backend, JobLost, LaunchError
from services.dispatcher.repository import ClaimedRun
from services.kit.consumer import Kit
from services.kit.listener import Listener

log = logging.getLogger("kernelbot.dispatcher")

LEASE_S = 30.0
HEARTBEAT_S = LEASE_S / 3
IDLE_WAKE_S = 1.0


class Scheduler:
    def __init__(self, kit: Kit, backends: Mapping[str, tuple[Backend, int]], *, owner: str, max_attempts: int,
                 database_url: str) -> None:
        self.kit = kit
        self.backends = backends  # gpu -> (backend, slots)
        self.owner = owner
        self.max_attempts = max_attempts
        self.database_url = database_url
        self.active: dict[str, asyncio.Task] = {}
        self._launched: dict[str, ClaimedRun] = {}
        self._active_by_gpu: dict[str, int] = dict.fromkeys(backends, 0)
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._listener = Listener(database_url, "kb_dispatch", lambda _gpu: self._wake.set(), self._wake.set)

    async def start(self) -> None:
        await self._listener.start()
        self._tasks = [asyncio.create_task(self._loop(), name="scheduler"),
                       asyncio.create_task(self._renew_leases(), name="lease-renewal")]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        # Running jobs are left to themselves: the next dispatcher resumes watching them.
        for task in self.active.values():
            task.cancel()
        await asyncio.gather(*self._tasks, *self.active.values(), return_exceptions=True)
        await self._listener.stop()

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self._claim_and_launch()
            except Exception:  # noqa: BLE001 - the loop must survive a database hiccup
                log.exception("claiming runs failed")
            try:
                await asyncio.wait_for(self._wake.wait(), IDLE_WAKE_S)
            except TimeoutError:
                pass

    async def _claim_and_launch(self) -> None:
        for gpu, (_, slots) in self.backends.items():
            free = slots - self._active_by_gpu[gpu]
            if free <= 0:
                continue
            for run in await repository.claim(self.kit.pool, gpu, free, self.owner, LEASE_S, list(self.active)):
                self._active_by_gpu[gpu] += 1
                self.active[run.run_id] = asyncio.create_task(self._drive(run), name=f"run-{run.run_id}")

    async def _renew_leases(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                await repository.renew(self.kit.pool, list(self.active), LEASE_S, self.owner)
                await self.kit.commit(lambda _conn: self._heartbeats())
            except Exception:  # noqa: BLE001
                log.exception("lease renewal failed")

    def _heartbeats(self) -> list[RunProgress]:
        """A beat per launched run, so clients see `last_heartbeat` move while a job runs (http-api.md §5.2)."""
        beat = int(time.time() // HEARTBEAT_S)  # one id per run and period, whichever dispatcher sends it
        return [RunProgress(run_id=run.run_id, submission_id=run.submission_id, sequence=beat, message="running",
                            correlation_id=str(run.submission_id))
                for run in self._launched.values()]

    async def _drive(self, run: ClaimedRun) -> None:
        try:
            await self._drive_unguarded(run)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - left to a later claim once the lease runs out
            log.exception("run %s failed in the dispatcher", run.run_id)
        finally:
            self.active.pop(run.run_id, None)
            self._active_by_gpu[run.gpu] -= 1
            self._wake.set()

    async def _drive_unguarded(self, run: ClaimedRun) -> None:
        backend, _ = self.backends[run.gpu]
        payload = RunPayload.model_validate(run.payload)
        job_ref = run.job_ref if run.status == "launched" else None
        if job_ref is None:
            try:
                job_ref = await backend.launch(payload)
            except LaunchError as exc:
                await self._retry_or_fail(run, JobLost("launch_error", str(exc), retryable=True))
                return
            await self._record_launch(run, backend.name, job_ref)
        self._launched[run.run_id] = run
        try:
            outcome = await backend.wait(job_ref, run.timeout_s)
        finally:
            self._launched.pop(run.run_id, None)
        if isinstance(outcome, JobLost) and outcome.retryable:
            await self._retry_or_fail(run, outcome)
            return
        await self._finish(run, payload, backend.name, outcome)

    async def _record_launch(self, run: ClaimedRun, backend: str, job_ref: str) -> None:
        async def apply(conn):
            await repository.mark_launched(conn, run.run_id, backend, job_ref, self.owner)
            common = {"run_id": run.run_id, "submission_id": run.submission_id, "gpu": run.gpu,
                      "attempt": run.attempts, "correlation_id": str(run.submission_id)}
            return [RunDispatched(backend=backend, job_ref=job_ref, **common), RunStarted(**common)]

        await self.kit.commit(apply)

    async def _retry_or_fail(self, run: ClaimedRun, lost: JobLost) -> None:
        if run.attempts < self.max_attempts:
            log.warning("run %s attempt %s: %s; queued again", run.run_id, run.attempts, lost.detail)
            await asyncio.sleep(min(10.0, 0.5 * 2 ** run.attempts))
            await repository.requeue(self.kit.pool, run.run_id)
            return
        payload = RunPayload.model_validate(run.payload)
        await self._finish(run, payload, "", lost)

    async def _finish(self, run: ClaimedRun, payload: RunPayload, backend: str,
                      outcome: FullResult | JobLost) -> None:
        async def apply(conn):
            if not await repository.mark_finished(conn, run.run_id):
                return []  # another dispatcher already reported this run
            common = {"run_id": run.run_id, "submission_id": run.submission_id, "gpu": run.gpu,
                      "correlation_id": str(run.submission_id)}
            if isinstance(outcome, JobLost):
                return [RunFailed(reason=outcome.reason, detail=outcome.detail, retryable=outcome.retryable,
                                  **common)]
            leaderboard = run.payload.get("leaderboard", "")
            return [RunCompleted(leaderboard=leaderboard, mode=payload.mode, secret=payload.secret,
                                 ranking_by=payload.ranking_by,
                                 backend=backend, result=outcome, **common)]

        await self.kit.commit(apply)

