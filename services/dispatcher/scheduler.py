"""The launch loop: claims queued runs per GPU within its slots, launches them, watches them, reports their ends.

Runs live in the durable queue (dispatch_runs) with a lease, so several dispatchers share the work and a run whose
dispatcher died is resumed by whoever claims it next. Launches are idempotent per run and attempt (the launch key
goes to the backend, which finds a job it started before), so a dispatcher that dies between starting a job and
recording it never starts it twice. One clock bounds every job: its budget from the problem's stage timeouts plus
the launch allowance, counted from the recorded launch; past it the job is cancelled on its backend.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from schemas.contracts import FullResult, RunPayload
from schemas.events import RunCompleted, RunDispatched, RunFailed, RunProgress, RunStarted
from services.dispatcher import repository, trace_store
from services.dispatcher.backends.base import PENDING, Backend, BackendUnavailable, JobLost, LaunchError
from services.dispatcher.planning import StoredRun
from services.dispatcher.repository import ClaimedRun
from services.kit.consumer import Kit
from services.kit.listener import Listener

log = logging.getLogger("kernelbot.dispatcher")

IDLE_WAKE_S = 1.0
MAX_BACKOFF_S = 60.0
UNREACHABLE_LAUNCH_TRIES = 3
# How long one wait for a job's end lasts before the budget is checked again.
WAIT_FOR_END_S = 1.0


@dataclass(frozen=True)
class Lane:
    """How one GPU name is served: its backend, concurrent runs, architecture and the backend's job ceiling."""

    backend: Backend
    slots: int
    arch: str | None = None
    max_job_s: int | None = None
    toolchain: str | None = None  # the image this GPU's runs need (RunPayload.toolchain)


def launch_key(run: ClaimedRun) -> str:
    return f"{run.run_id}.{run.attempts}"


def job_budget_s(run: ClaimedRun, lane: Lane) -> int:
    """The run's budget from its problem (stored at planning), capped by what the backend allows one job."""
    return min(run.timeout_s, lane.max_job_s) if lane.max_job_s else run.timeout_s


def completed_event(run_id: str, submission_id: int, gpu: str, stored_payload: dict, backend: str,
                    result: FullResult) -> RunCompleted:
    """A run's RunCompleted from what the dispatcher stored when it planned the run; only the result comes from
    outside. The backend's collection and a runner's own report both build it here, so they are one event."""
    payload = StoredRun.model_validate(stored_payload)
    return RunCompleted(run_id=run_id, submission_id=submission_id, gpu=gpu, correlation_id=str(submission_id),
                        leaderboard=payload.leaderboard, mode=payload.mode, secret=payload.secret,
                        ranking_by=payload.ranking_by, backend=backend, result=result)


class Scheduler:
    def __init__(self, kit: Kit, lanes: Mapping[str, Lane], *, owner: str, max_attempts: int, database_url: str,
                 retry_backoff_s: float = 2.0, lease_s: float = 30.0) -> None:
        self.kit = kit
        self.lanes = lanes
        self.owner = owner
        self.max_attempts = max_attempts
        self.retry_backoff_s = retry_backoff_s
        self.lease_s = lease_s
        self.heartbeat_s = lease_s / 3  # a lease is renewed well before it runs out
        self.active: dict[str, asyncio.Task] = {}
        self._launched: dict[str, ClaimedRun] = {}
        self._active_by_gpu: dict[str, int] = dict.fromkeys(lanes, 0)
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._listener = Listener(database_url).subscribe("kb_dispatch", lambda _gpu: self._wake.set(), self._wake.set)

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
        for backend in {id(lane.backend): lane.backend for lane in self.lanes.values()}.values():
            close = getattr(backend, "close", None)
            if close is not None:
                await close()

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
        for gpu, lane in self.lanes.items():
            free = lane.slots - self._active_by_gpu[gpu]
            if free <= 0:
                continue
            for run in await repository.claim(self.kit.pool, gpu, free, self.owner, self.lease_s, list(self.active)):
                self._active_by_gpu[gpu] += 1
                self.active[run.run_id] = asyncio.create_task(self._drive(run), name=f"run-{run.run_id}")

    async def _renew_leases(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await repository.renew(self.kit.pool, list(self.active), self.lease_s, self.owner)
                await self.kit.commit(self._heartbeats)
            except Exception:  # noqa: BLE001
                log.exception("lease renewal failed")

    async def _heartbeats(self, _conn) -> list[RunProgress]:
        """A beat per launched run, so clients see `last_heartbeat` move while a job runs
        (docs/http-api.md "Job states")."""
        beat = int(time.time() // self.heartbeat_s)  # one id per run and period, whichever dispatcher sends it
        return [RunProgress(run_id=run.run_id, submission_id=run.submission_id, sequence=beat, message="running",
                            correlation_id=str(run.submission_id))
                for run in self._launched.values()]

    async def _drive(self, run: ClaimedRun) -> None:
        try:
            await self._drive_unguarded(run)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - claimed again by us or, once the lease runs out, by another replica
            log.exception("run %s failed in the dispatcher", run.run_id)
        finally:
            self.active.pop(run.run_id, None)
            self._active_by_gpu[run.gpu] -= 1
            self._wake.set()

    async def _drive_unguarded(self, run: ClaimedRun) -> None:
        lane = self.lanes[run.gpu]
        backend = lane.backend
        payload = RunPayload.model_validate(run.payload)
        if payload.arch is None and lane.arch is not None:
            payload = payload.model_copy(update={"arch": lane.arch})
        if payload.toolchain is None and lane.toolchain is not None:
            payload = payload.model_copy(update={"toolchain": lane.toolchain})
        job_ref, launched_at = run.job_ref, run.launched_at
        if run.status != "launched" or job_ref is None:
            try:
                job_ref = await self._launch(backend, payload, run)
            except (LaunchError, BackendUnavailable) as exc:
                detail = f"{backend.name} did not start the job: {exc}"
                await self._retry_or_fail(run, JobLost("launch_error", detail, retryable=True))
                return
            launched_at = await self._record_launch(run, backend.name, job_ref)
            if launched_at is None:
                return  # our lease went to another dispatcher, which finds this job by its launch key
        self._launched[run.run_id] = run
        try:
            outcome = await self._watch(backend, job_ref, launched_at, job_budget_s(run, lane))
        finally:
            self._launched.pop(run.run_id, None)
        if isinstance(outcome, JobLost) and outcome.retryable:
            await self._retry_or_fail(run, outcome)
            return
        await self._finish(run, payload, backend.name, outcome)

    async def _launch(self, backend: Backend, payload: RunPayload, run: ClaimedRun) -> str:
        """Launch, asking again with the same key while the backend is unreachable: a launch whose answer was lost
        may have started the job, and only the same key finds it."""
        tries = 0
        while True:
            try:
                return await backend.launch(payload, launch_key(run))
            except BackendUnavailable as exc:
                tries += 1
                if tries == UNREACHABLE_LAUNCH_TRIES:
                    raise
                log.warning("launching run %s on %s: %s; asking again", run.run_id, backend.name, exc)
                # never sooner than a rate limit asked (its own pacing, which may exceed our backoff's cap)
                await asyncio.sleep(max(min(MAX_BACKOFF_S, self.retry_backoff_s * 2 ** (tries - 1)),
                                        exc.retry_after_s or 0.0))

    async def _watch(self, backend: Backend, job_ref: str, launched_at: datetime,
                     budget_s: int) -> FullResult | JobLost:
        deadline = launched_at + timedelta(seconds=budget_s)
        unreachable = ""
        while True:
            rest_s = 0.0
            try:
                outcome = await backend.poll(job_ref)
                unreachable = ""
            except BackendUnavailable as exc:  # the clock keeps running: an unreachable backend ends in timeout
                log.warning("polling %s job %s: %s", backend.name, job_ref, exc)
                outcome, unreachable, rest_s = PENDING, f"; the last poll failed: {exc}", exc.retry_after_s or 0.0
            if outcome is not PENDING:
                return outcome
            if datetime.now(UTC) > deadline:
                try:
                    await backend.cancel(job_ref)
                except BackendUnavailable as exc:
                    log.warning("cancelling %s job %s failed: %s", backend.name, job_ref, exc)
                return JobLost("timeout", f"the job ran past its budget of {budget_s} s and was cancelled on "
                                          f"{backend.name} (job {job_ref}){unreachable}")
            await self._until_next_poll(backend, job_ref, rest_s)

    @staticmethod
    async def _until_next_poll(backend: Backend, job_ref: str, rest_s: float = 0.0) -> None:
        """A backend that can tell when a job ends (`wait`) is asked again the moment it does; one that asked us to
        wait (`rest_s`, a rate limit's) no sooner than that."""
        wait = getattr(backend, "wait", None)
        if wait is None or rest_s:
            await asyncio.sleep(max(backend.poll_interval_s, rest_s))
        else:
            await wait(job_ref, WAIT_FOR_END_S)

    async def _record_launch(self, run: ClaimedRun, backend: str, job_ref: str) -> datetime | None:
        launched: list[datetime | None] = [None]

        async def apply(conn):
            launched[0] = await repository.mark_launched(conn, run.run_id, backend, job_ref, self.owner)
            if launched[0] is None:
                return []
            common = {"run_id": run.run_id, "submission_id": run.submission_id, "gpu": run.gpu,
                      "attempt": run.attempts, "correlation_id": str(run.submission_id)}
            return [RunDispatched(backend=backend, job_ref=job_ref, **common), RunStarted(**common)]

        await self.kit.commit(apply)
        return launched[0]

    async def _retry_or_fail(self, run: ClaimedRun, lost: JobLost) -> None:
        if run.attempts < self.max_attempts:
            log.warning("run %s attempt %s: %s; queued again", run.run_id, run.attempts, lost.detail)
            await asyncio.sleep(min(MAX_BACKOFF_S, self.retry_backoff_s * 2 ** (run.attempts - 1)))
            await repository.requeue(self.kit.pool, run.run_id, self.owner)
            return
        payload = RunPayload.model_validate(run.payload)
        final = JobLost(lost.reason, f"{lost.detail} (gave up after {run.attempts} attempts)", lost.retryable)
        await self._finish(run, payload, "", final)

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
            kept = await trace_store.keep_traces(conn, run.run_id, run.submission_id, run.gpu, outcome)
            return [completed_event(run.run_id, run.submission_id, run.gpu, run.payload, backend, kept)]

        await self.kit.commit(apply)
