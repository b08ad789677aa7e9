"""One real platform for every gateway test, in the test process (tests/support/in_process.py): real NATS, a
real Postgres database cloned from the migrated template, every service's own app on one event loop, and the gateway
answered through httpx.ASGITransport. The modules that need a server on a port take `gateway_processes` instead
(each service a subprocess); tests/e2e runs subprocesses too.

Runs on the null backend (GPU `null`), which passes every stage at once. Boards:
  `open`    public, GPU `null`          `closed`  closed, GPU `null`
  `idle`    public, GPU `idle`, which no backend serves: its jobs stay pending, so queues and deletions of
            unfinished jobs are deterministic
Tests share the platform: each uses its own users (and, where it counts rankings, its own board).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from problems import PROBLEMS_ROOT
from services.kit.embedded import start_nats
from tests.support.cloned_database import cloned
from tests.support.events import delete_all_streams
from tests.support.in_process import InProcessPlatform
from tests.support.platform import Platform, identity_board

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
_user_ids = itertools.count(7000)


@pytest.fixture(scope="package")
def gateway_nats(_external_nats_url: str | None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if _external_nats_url is not None:
        asyncio.run(delete_all_streams(_external_nats_url))
        yield _external_nats_url
        return
    with start_nats(tmp_path_factory.mktemp("gateway-nats")) as server:
        yield server.url


@pytest.fixture(scope="package")
def gateway_database(postgres_server_url: str, migrated_template: str) -> Iterator[str]:
    with cloned(postgres_server_url, migrated_template, "kb_gateway") as url:
        yield url


# These modules read submissions that wait on purpose (a stopped queue, an idle GPU) right after submitting them,
# which the gateway takes for popcorn-cli's first poll and holds for the whole long poll (docs/polling.md). Long
# polling has its own tests (tests/e2e/test_long_poll.py, tests/unit); here every read is answered at once.
NO_LONG_POLL = {"KB_LONG_POLL_S": "0"}


@pytest.fixture(scope="package")
def gateway(gateway_nats: str, gateway_database: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessPlatform]:
    running = InProcessPlatform(gateway_nats, gateway_database, Path(tmp_path_factory.mktemp("gateway")),
                                null_gpus=("null",), extra_env=NO_LONG_POLL)
    running.start()
    try:
        add_boards(running)
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="package")
def gateway_processes(postgres_server_url: str, migrated_template: str,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    """The same platform with every service a subprocess, for the modules that need a server on a port (a runner
    fetching a payload, schemathesis, SSE clients that go away, parallel connections, replicas). Its own NATS and
    database: two platforms on one stream would split each other's messages."""
    workdir = Path(tmp_path_factory.mktemp("gateway-processes"))
    with start_nats(workdir / "nats") as nats, \
            cloned(postgres_server_url, migrated_template, "kb_gateway_processes") as database:
        running = Platform(nats.url, database, workdir, null_gpus=("null",), extra_env=NO_LONG_POLL)
        running.start()
        try:
            add_boards(running)
            yield running
        finally:
            running.stop()


def add_boards(platform: Platform) -> None:
    platform.add_boards(identity_board("open", ["null"]), identity_board("closed", ["null"], "closed"),
                        identity_board("idle", ["idle"]))


def new_user(platform: Platform) -> tuple[str, str]:
    """A fresh registered user: (user_id, cli_id)."""
    user_id = str(next(_user_ids))
    return user_id, platform.register(user_id, f"user{user_id}")


def cli(cli_id: str) -> dict[str, str]:
    return {"X-Popcorn-Cli-Id": cli_id}
