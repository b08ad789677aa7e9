"""`python -m runner.agent`: a GPU host's runner agent. It holds one credential, its runner identity on NATS (user
`runner-<name>`), and nothing of the platform: no database URL, no services' login, no token.

It pulls the jobs of its GPU from its own durable consumer (`<name>-<gpu>` on the RUNNER_JOBS work queue, which the
dispatcher's agent backend fills: services/dispatcher/backends/agent.py), runs each with `python -m runner` (the same
entry point and sandbox as the local backend) in an environment that holds no credential, and publishes the result to
`runner.<name>.run.completed`, where the dispatcher records it once it has checked that the run is on a GPU this
runner serves. Every reply it receives (publish acknowledgements, pulled jobs) arrives below `_INBOX_runner_<name>`,
the only subjects its user may subscribe to.

One job at a time: an agent is one GPU. Several agents (hosts) with the same identity share the consumer, each taking
the next job when it is free. Settings (environment): KB_RUNNER_NAME, KB_RUNNER_GPU, KB_RUNNER_NATS_URL (the
servers), KB_RUNNER_NATS_PASSWORD (the password of user `runner-<name>`; or give user and password in the URL),
KB_RUNS_DIR, KB_LOG_LEVEL.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from runner.container import run_completed
from runner.task.payload import PayloadError, decode_payload
from schemas.contracts import FullResult
from schemas.streams import (
    RUNNER_JOBS,
    RUNNER_REPORTS,
    runner_inbox_prefix,
    runner_job_consumer,
    runner_report_id,
    runner_report_nonce,
    runner_report_subject,
)

NATS_URL_ENV = "KB_RUNNER_NATS_URL"
PASSWORD_ENV = "KB_RUNNER_NATS_PASSWORD"
NAME_ENV = "KB_RUNNER_NAME"
GPU_ENV = "KB_RUNNER_GPU"
RUNS_DIR_ENV = "KB_RUNS_DIR"
LOG_LEVEL_ENV = "KB_LOG_LEVEL"
SETTINGS = (NATS_URL_ENV, PASSWORD_ENV, NAME_ENV, GPU_ENV, RUNS_DIR_ENV, LOG_LEVEL_ENV)
# What a run inherits from the agent: nothing that names a broker or holds a password.
RUNNER_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES",
              "KB_HARNESS_CHAIN")
FETCH_WAIT_S = 5.0
PUBLISH_TIMEOUT_S = 10.0
REPORT_ATTEMPTS = 5
# Past its stages' timeouts (the runner enforces those) a run gets this long before the agent kills it, so a wedged
# runner cannot hold the GPU forever.
RUN_GRACE_S = 600

log = logging.getLogger("kernelbot.runner.agent")


@dataclass(frozen=True)
class AgentConfig:
    nats_url: str
    runner: str
    gpu: str
    runs_dir: Path
    password: str = ""
    sandbox: bool = True

    def credentials(self) -> dict[str, str]:
        """nats-py's user and password: the runner's own user, unless the URL names one."""
        return {"user": f"runner-{self.runner}", "password": self.password} if self.password else {}


def config_from_env(environ: Mapping[str, str], *, sandbox: bool = True) -> AgentConfig:
    missing = [name for name in (NATS_URL_ENV, NAME_ENV, GPU_ENV) if not environ.get(name)]
    if missing:
        raise SystemExit(f"runner agent: set {', '.join(missing)}")
    runs_dir = Path(environ.get(RUNS_DIR_ENV) or Path(tempfile.gettempdir()) / "kernelbot-runs")
    return AgentConfig(environ[NATS_URL_ENV], environ[NAME_ENV], environ[GPU_ENV], runs_dir,
                       environ.get(PASSWORD_ENV, ""), sandbox)


def _ceiling_s(payload_text: str) -> float | None:
    try:
        payload = decode_payload(payload_text)
    except PayloadError:
        return None  # the runner says what is wrong with it, at once
    return payload.test_timeout + payload.benchmark_timeout + payload.ranked_timeout + RUN_GRACE_S


async def run_job(config: AgentConfig, run_id: str, payload_text: str) -> FullResult:
    """Run one payload with `python -m runner` in a private directory, and read the result it leaves."""
    config.runs_dir.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=config.runs_dir))
    try:
        payload_file, result_file = run_dir / "payload.txt", run_dir / "result.json"
        fd = os.open(payload_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # it may carry the run's seed
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(payload_text)
        command = [sys.executable, "-m", "runner", "--payload", str(payload_file), "--result", str(result_file),
                   *([] if config.sandbox else ["--no-sandbox"])]
        env = {k: v for k, v in os.environ.items() if k in RUNNER_ENV}
        with open(run_dir / "runner.log", "wb") as output:  # noqa: ASYNC230 - one small file per run
            child = await asyncio.create_subprocess_exec(*command, env=env, stdout=output, stderr=output,
                                                         stdin=asyncio.subprocess.DEVNULL, start_new_session=True)
            try:
                code = await asyncio.wait_for(child.wait(), _ceiling_s(payload_text))
            except TimeoutError:
                os.killpg(child.pid, signal.SIGKILL)  # the runner leads its session: harness and user code go too
                await child.wait()
                return FullResult(success=False, error=f"run {run_id} passed every stage timeout and was killed")
        try:
            return FullResult.model_validate_json(result_file.read_bytes())
        except (OSError, ValueError) as exc:
            log.warning("run %s left no readable result (exit status %s): %s; its log: %s", run_id, code, exc,
                        (run_dir / "runner.log").read_text(errors="replace")[-2000:])
            return FullResult(success=False, error=f"the runner exited with status {code} and left no result")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


async def report(js, runner: str, run_id: str, result: FullResult) -> None:
    """Publish the result under this runner's name; one message id for all attempts makes a repeat harmless."""
    event = run_completed({"run_id": run_id}, result, as_runner=True)
    assert event is not None  # a run id is all a named runner needs
    message_id = runner_report_id(runner, event.message_id, runner_report_nonce())  # one id for every attempt
    for attempt in range(1, REPORT_ATTEMPTS + 1):
        try:
            await js.publish(runner_report_subject(runner, event.subject), event.model_dump_json().encode(),
                             stream=RUNNER_REPORTS.name, timeout=PUBLISH_TIMEOUT_S,
                             headers={"Nats-Msg-Id": message_id})
            return
        except Exception as exc:  # noqa: BLE001 - a connection lost meanwhile: asked again once it is back
            if attempt == REPORT_ATTEMPTS:
                log.error("could not report run %s: %r; the dispatcher's clock ends it", run_id, exc)
                return
            await asyncio.sleep(2.0 * attempt)


async def take(js, config: AgentConfig, data: bytes) -> None:
    try:
        job = json.loads(data)
        run_id, payload_text = str(job["run_id"]), str(job["payload"])
    except (ValueError, KeyError, TypeError) as exc:
        log.error("dropped a job that is not one: %r", exc)
        return
    log.info("running %s", run_id)
    result = await run_job(config, run_id, payload_text)
    await report(js, config.runner, run_id, result)
    log.info("reported %s (success=%s)", run_id, result.success)


async def serve(config: AgentConfig, stop: asyncio.Event | None = None) -> None:
    import nats
    from nats.errors import Error as NatsError
    from nats.errors import TimeoutError as FetchTimeout

    stop = stop or asyncio.Event()
    client = await nats.connect(config.nats_url, **config.credentials(),
                                inbox_prefix=runner_inbox_prefix(config.runner), max_reconnect_attempts=-1,
                                name=f"runner-agent-{config.runner}-{config.gpu}", reconnect_time_wait=1.0)
    try:
        js = client.jetstream()
        jobs_consumer = runner_job_consumer(config.runner, config.gpu)
        jobs = await js.pull_subscribe_bind(jobs_consumer, stream=RUNNER_JOBS.name)
        log.info("runner %s serving %s", config.runner, config.gpu)
        while not stop.is_set():
            try:
                messages = await jobs.fetch(1, timeout=FETCH_WAIT_S)
            except (FetchTimeout, TimeoutError):
                continue
            except NatsError as exc:  # the consumer not created yet (no dispatcher has started), or NATS away
                log.warning("cannot pull jobs from %s: %r; asking again", jobs_consumer, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), FETCH_WAIT_S)
                continue
            for message in messages:
                # Taken once: a job lost with this agent ends on the dispatcher's clock and is retried as a new
                # attempt, rather than run twice at once on two hosts.
                await message.ack()
                await take(js, config, message.data)
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.agent", description=__doc__.splitlines()[0])
    parser.add_argument("--no-sandbox", action="store_true", help="run the harness unconfined (development only)")
    args = parser.parse_args(argv)
    config = config_from_env(os.environ, sandbox=not args.no_sandbox)
    logging.basicConfig(level=os.environ.get(LOG_LEVEL_ENV, "INFO").upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)  # the job in hand is finished and reported first
        await serve(config, stop)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
