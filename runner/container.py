"""The runner image's entry point: `python -m runner.container [--payload-file FILE] [--result result.json]`.

Reads the payload (base64 of zlib-compressed JSON, or plain JSON) from `--payload-file` (deleted once read) or from
`SUBMISSION_PAYLOAD`; either may instead hold a single-use https link to it, fetched once (a payload too large for its
backend's field: services/dispatcher/backends/carry.py). The onboarding guide's minimal smoke payload gets defaults
(runner/task/smoke.py). Runs it in the sandbox, writes `result.json` atomically, and, when it is given NATS settings
(`KB_NATS_URL`) and the payload names its run (`run_id`, `submission_id`, `leaderboard`; `backend` optional),
publishes `RunCompleted` itself. The event id is the one the dispatcher's backend would use when it collects
result.json instead (`RunCompleted:<run_id>`), so a result reported both ways is recorded once.

With `KB_RUNNER_NAME` (a runner on a vendor's host, whose NATS user may publish only below its own name) the result
goes to `runner.<name>.run.completed` instead, and only the payload's `run_id` is needed: the dispatcher checks that
the run is on a GPU this runner serves and records the event from its own record of the run.

The warm-up and every stage of the run fork from one warm runner (runner/warm.py) that this entry point starts for
the run, so torch is imported once per run rather than once per process; `--warm SOCKET` uses a warm runner that
outlives runs (Modal's containers keep one), `--cold` starts every process cold.

Exit status: 0 when the result was written (and, if asked for, published), 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from runner.__main__ import PAYLOAD_ENV, read_payload_text, write_result_atomically
from runner.confinement.sandbox import SandboxPolicy
from runner.launching.chain import chain_enabled
from runner.launching.warm_client import WarmLauncher, WarmUnavailable, start_warm_runner
from runner.stages.execute import execute
from runner.task.payload import PayloadError, decode_payload_object, fetch_if_reference, payload_from_object
from runner.task.smoke import is_smoke_payload, judged, summary
from runner.task.toolchain import refusal as toolchain_refusal
from schemas.contracts import FullResult
from schemas.events import RunCompleted
from schemas.streams import (
    EVENTS,
    RUNNER_REPORTS,
    runner_inbox_prefix,
    runner_report_id,
    runner_report_nonce,
    runner_report_subject,
)

NATS_URL_ENV = "KB_NATS_URL"
RUNNER_NAME_ENV = "KB_RUNNER_NAME"
PUBLISH_TIMEOUT_S = 10.0


def run_completed(raw: dict, result: FullResult, *, as_runner: bool = False) -> RunCompleted | None:
    """The event for this run, or None when the payload does not name the run well enough to report it (a named
    runner needs only the run id: the dispatcher fills in the rest from its own record)."""
    needed = ("run_id",) if as_runner else ("run_id", "submission_id", "leaderboard")
    if not all(raw.get(key) not in (None, "") for key in needed):
        return None
    if as_runner:
        raw = {"submission_id": 0, "leaderboard": "", **raw}
    return RunCompleted(
        run_id=str(raw["run_id"]), submission_id=int(raw["submission_id"]), leaderboard=str(raw["leaderboard"]),
        gpu=str(raw.get("gpu", "")), mode=raw.get("mode", "test"), secret=bool(raw.get("secret", False)),
        ranking_by=str(raw.get("ranking_by", "last")), backend=str(raw.get("backend", "container")), result=result,
        correlation_id=str(raw["submission_id"]),
    )


async def publish(nats_url: str, event: RunCompleted, runner_name: str = "") -> None:
    """Publish to the EVENTS stream (or, for a named runner, its own report subject) and wait for the
    acknowledgement (the fixed Nats-Msg-Id makes a retry safe)."""
    import nats

    subject, stream, message_id = event.subject, EVENTS.name, event.message_id
    options: dict = {}
    if runner_name:
        subject, stream = runner_report_subject(runner_name, event.subject), RUNNER_REPORTS.name
        message_id = runner_report_id(runner_name, event.message_id, runner_report_nonce())
        options["inbox_prefix"] = runner_inbox_prefix(runner_name)  # the only inbox a runner's user may read
    client = await nats.connect(nats_url, connect_timeout=PUBLISH_TIMEOUT_S, max_reconnect_attempts=3, **options)
    try:
        await client.jetstream().publish(subject, event.model_dump_json().encode(),
                                         headers={"Nats-Msg-Id": message_id}, stream=stream,
                                         timeout=PUBLISH_TIMEOUT_S)
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.container", description="Run one KernelBot payload.")
    parser.add_argument("--payload-file", type=Path, help=f"payload file (default: ${PAYLOAD_ENV})")
    parser.add_argument("--result", type=Path, default=Path("result.json"), help="where to write the FullResult")
    parser.add_argument("--no-sandbox", action="store_true", help="run the harness unconfined (development only)")
    parser.add_argument("--warm", type=Path, default=None,
                        help="socket of a running warm runner to fork the harness processes from (runner/warm.py)")
    parser.add_argument("--cold", action="store_true",
                        help="start every harness process cold instead of from a warm runner of this run's own")
    args = parser.parse_args(argv)
    nats_url = os.environ.pop(NATS_URL_ENV, "")  # never handed on; the sandbox scrubs it as well
    runner_name = os.environ.pop(RUNNER_NAME_ENV, "")
    raw: dict = {}
    payload, refused = None, None
    try:
        raw = decode_payload_object(fetch_if_reference(read_payload_text(args.payload_file)))
        payload = payload_from_object(raw)
    except (PayloadError, OSError) as exc:
        result = FullResult(success=False, error=f"invalid payload: {exc}")
    else:
        refused = toolchain_refusal(payload.toolchain, os.environ)
    if refused:
        print(refused, file=sys.stderr)
        result = FullResult(success=False, error=refused)
    elif payload is not None:
        with _warm_runner(args) as warm:
            result = execute(payload, sandbox=None if args.no_sandbox else SandboxPolicy(), warm=warm,
                             chain=chain_enabled())
        if is_smoke_payload(raw):  # the onboarding guide's smoke test: say plainly what happened
            result = judged(result)
            print(summary(result))
    try:
        write_result_atomically(result, args.result)
    except OSError as exc:
        print(f"cannot write {args.result}: {exc}", file=sys.stderr)
        return 1
    event = run_completed(raw, result, as_runner=bool(runner_name))
    if nats_url and event is not None:
        try:
            asyncio.run(publish(nats_url, event, runner_name))
        except Exception as exc:  # noqa: BLE001 - the result file stays for the backend to collect
            print(f"could not publish RunCompleted: {exc!r}", file=sys.stderr)
            return 1
    return 0


@contextlib.contextmanager
def _warm_runner(args: argparse.Namespace) -> Iterator[WarmLauncher | None]:
    """The warm runner the stages fork from: the one given, else one of this run's own (torch imported once for
    the warm-up and every stage, rather than once per process), else none."""
    if args.warm is not None:
        yield WarmLauncher(args.warm)
        return
    if args.cold:
        yield None
        return
    directory = Path(tempfile.mkdtemp(prefix="kernelbot-warm-"))
    try:
        socket_path, server = start_warm_runner(directory)
    except (WarmUnavailable, OSError) as exc:
        print(f"starting every process cold: {exc}", file=sys.stderr)
        shutil.rmtree(directory, ignore_errors=True)
        yield None
        return
    try:
        yield WarmLauncher(socket_path)
    finally:
        server.terminate()
        server.wait(60)
        shutil.rmtree(directory, ignore_errors=True)


def reexec_with_payload_file(arguments: list[str]) -> None:
    """Unsetting a variable leaves it in /proc/<pid>/environ: move the payload into a private file by one re-exec,
    as `python -m runner` does."""
    handle, path = tempfile.mkstemp(prefix="kernelbot-payload-", suffix=".txt")  # mode 0600
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(os.environ.pop(PAYLOAD_ENV))
    os.execve(sys.executable, [sys.executable, "-m", "runner.container", "--payload-file", path, *arguments],
              dict(os.environ))


if __name__ == "__main__":
    if PAYLOAD_ENV in os.environ and not any(arg.startswith("--payload-file") for arg in sys.argv[1:]):
        reexec_with_payload_file(sys.argv[1:])
    sys.exit(main())
