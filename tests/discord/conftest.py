"""One real platform for the package (NATS, Postgres, every service as a subprocess), a fresh fake Discord per test."""

from __future__ import annotations

import uuid
import warnings
from datetime import UTC, datetime, timedelta

import discord
import pytest

from services.kit.embedded import create_database, drop_database, start_nats
from tests.discord.wire import start_bot
from tests.support.fake_discord import FakeDiscord
from tests.support.fakes.hf_hub import TOKEN as HF_TOKEN
from tests.support.fakes.hf_hub import FakeHub
from tests.support.platform import Platform, identity_board

SESSION_SECRET = "discord-tests-session-secret"  # the gateway's, given to a bot that links profile artifacts


@pytest.fixture(scope="package")
def module_nats(_external_nats_url, tmp_path_factory):
    if _external_nats_url is not None:
        yield _external_nats_url
        return
    with start_nats(tmp_path_factory.mktemp("nats")) as server:
        yield server.url


@pytest.fixture(scope="package")
def module_database(postgres_server_url):
    name = f"kb_discord_{uuid.uuid4().hex[:12]}"
    url = create_database(postgres_server_url, name)
    yield url
    try:
        drop_database(postgres_server_url, name)
    except Exception as exc:  # noqa: BLE001 - a leftover test database must not fail the module
        warnings.warn(f"could not drop test database {name}: {exc!r}", stacklevel=1)


@pytest.fixture(scope="package")
def hf_hub():
    """A fake of the Hugging Face Hub's upload endpoints, for the open-data export of the gateway and the bot."""
    hub = FakeHub(datasets=("kernelbot/open-data", "kernelbot/open-data-public")).start()
    yield hub
    hub.stop()


def competition_board(name: str):
    board = identity_board(name, ["null"])
    return board.model_copy(update={"deadline": datetime.now(UTC) + timedelta(days=30)})


@pytest.fixture(scope="package")
def platform(module_nats, module_database, tmp_path_factory, hf_hub):
    # GPU `null` is served by the dispatcher's null backend: every stage passes at once, the rest is the real path.
    # The gateway exports to the fake Hub: on request, and on a schedule whose first export is at start-up.
    hf_env = {"KB_HF_TOKEN": HF_TOKEN, "KB_HF_PRIVATE_DATASET": "kernelbot/open-data",
              "KB_HF_PUBLIC_DATASET": "kernelbot/open-data-public", "HF_ENDPOINT": hf_hub.url,
              "KB_HF_EXPORT_EVERY_H": "1", "KB_SESSION_SECRET": SESSION_SECRET}
    running = Platform(module_nats, module_database, tmp_path_factory.mktemp("platform"), null_gpus=("null", "null2"),
                       extra_env=hf_env)
    running.start()
    running.load_bundled_problems()
    running.add_boards(identity_board("two_gpus", ["cpu", "unserved_gpu"]),
                       identity_board("closed_board", ["cpu"], visibility="closed"),
                       identity_board("fast_board", ["null"]), identity_board("fast_pair", ["null", "null2"]),
                       # a running competition and its dev board: what the scheduled export takes and leaves
                       competition_board("sprint_comp"), competition_board("sprint_comp-dev"))
    yield running
    running.stop()


@pytest.fixture
async def fake_discord():
    fake = await FakeDiscord().start()
    base = discord.http.Route.BASE
    discord.http.Route.BASE = f"{fake.url}/api/v10"
    yield fake
    discord.http.Route.BASE = base
    await fake.stop()


@pytest.fixture
async def wire(fake_discord, platform):
    running = await start_bot(fake_discord, platform.nats_url, platform.database_url)
    yield running
    await running.client.close()
