"""`python -m runner.report --run-id ID --result result.json`: publish a finished run's result under this runner's
own NATS identity (KB_NATS_URL carrying the user `runner-<name>`, KB_RUNNER_NAME=<name>).

For hosts whose runner container has no network (a Buildkite agent: deploy/buildkite/run-job.sh): the run happens
with `--network none`, then this, in a second container that runs no submitted code, reports the result. The
dispatcher records it only for a run on a GPU whose catalogue entry lists the runner; the same result collected
through the backend's artifact is recorded once. Exit status 0 when published, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from runner.container import NATS_URL_ENV, RUNNER_NAME_ENV, publish, run_completed
from schemas.contracts import FullResult


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.report", description=__doc__.splitlines()[0])
    parser.add_argument("--run-id", required=True, help="the run the result belongs to")
    parser.add_argument("--result", type=Path, required=True, help="the result.json the run left")
    args = parser.parse_args(argv)
    nats_url, runner_name = os.environ.get(NATS_URL_ENV, ""), os.environ.get(RUNNER_NAME_ENV, "")
    if not nats_url or not runner_name:
        print(f"set {NATS_URL_ENV} and {RUNNER_NAME_ENV} to report under this runner's identity", file=sys.stderr)
        return 1
    try:
        result = FullResult.model_validate_json(args.result.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"cannot read the result {args.result}: {exc}", file=sys.stderr)
        return 1
    event = run_completed({"run_id": args.run_id}, result, as_runner=True)
    if event is None:
        print("a run id is needed", file=sys.stderr)
        return 1
    try:
        asyncio.run(publish(nats_url, event, runner_name))
    except Exception as exc:  # noqa: BLE001 - the artifact still carries the result
        print(f"could not publish the result as runner {runner_name}: {exc!r}", file=sys.stderr)
        return 1
    print(f"result of run {args.run_id} reported as runner {runner_name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
