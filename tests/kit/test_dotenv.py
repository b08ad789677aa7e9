"""Upstream KernelBot's `.env` file and its names for the port and the public address (docs/operations.md, "The
environment"): a service reads `.env` from the directory it starts in, the environment winning over the file, and a
setting named both ways in one place refuses to start."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from services.cli.up import Stack
from services.discord.settings import DiscordSettings
from services.gateway.settings import GatewaySettings
from services.kit.embedded import free_port
from services.kit.settings import ServiceSettings
from services.kit.upstream_env import UPSTREAM_NAMES, ConflictingSettings

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.upper().startswith("KB_") or name.upper() in UPSTREAM_NAMES:
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # where `.env` is read from


def hermetic_env(**names: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("KB_") and k.upper() not in UPSTREAM_NAMES}
    # started elsewhere than the checkout: this checkout's code all the same
    return {**env, "PYTHONPATH": str(REPO), **names}


def start_gateway(cwd: Path, env: dict[str, str], port: int) -> subprocess.Popen:
    gateway = subprocess.Popen([sys.executable, "-m", "services.cli", "serve", "gateway"], cwd=cwd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and gateway.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return gateway
        except httpx.HTTPError:
            time.sleep(0.2)
    gateway.kill()
    raise AssertionError(f"the gateway never answered on port {port}: {gateway.communicate()[0]}")


def stop(gateway: subprocess.Popen) -> None:
    gateway.terminate()
    gateway.wait(timeout=30)


def test_a_gateway_started_beside_upstreams_env_reads_it_and_the_environment_wins(nats_url, database_url, tmp_path):
    port = free_port()
    # Upstream's README writes the optional names empty; its DATABASE_URL here would clash with ours were it read
    # from the same place, but the environment's KB_DATABASE_URL wins over the file without a clash.
    (tmp_path / ".env").write_text(f"PORT={port}\nADMIN_TOKEN=from-the-dotenv-file\nDISCORD_CLUSTER_STAGING_ID=\n"
                                   "GITHUB_TOKEN=\nDATABASE_URL=postgresql://127.0.0.1:1/not-this-one\n")
    env = hermetic_env(KB_NATS_URL=nats_url, KB_DATABASE_URL=database_url)
    gateway = start_gateway(tmp_path, env, port)  # listening on the file's PORT
    try:
        stats = f"http://127.0.0.1:{port}/admin/stats"
        assert httpx.get(stats, headers={"Authorization": "Bearer from-the-dotenv-file"}).status_code == 200
    finally:
        stop(gateway)

    gateway = start_gateway(tmp_path, {**env, "ADMIN_TOKEN": "from-the-environment"}, port)
    try:
        assert httpx.get(stats, headers={"Authorization": "Bearer from-the-environment"}).status_code == 200
        assert httpx.get(stats, headers={"Authorization": "Bearer from-the-dotenv-file"}).status_code == 401
    finally:
        stop(gateway)


def test_a_setting_named_both_ways_in_the_file_refuses_to_start(tmp_path):
    (tmp_path / ".env").write_text("KB_ADMIN_TOKEN=a\nADMIN_TOKEN=b\n")
    done = subprocess.run([sys.executable, "-m", "services.cli", "serve", "gateway"], cwd=tmp_path,
                          env=hermetic_env(KB_DATABASE_URL="postgresql://127.0.0.1:1/none"), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip() == ("kernelbot serve gateway: both KB_ADMIN_TOKEN and ADMIN_TOKEN (upstream KernelBot's "
                                   "name for it) are set in .env; unset one of them"), done.stderr


def test_the_file_fills_in_what_the_environment_leaves_out(monkeypatch, tmp_path):
    (tmp_path / ".env").write_text("KB_LOG_LEVEL=INFO\nKB_POOL_SIZE=3\nGITHUB_REPO=gpu-mode/from-file\n"
                                   "KB_ADMIN_TOKEN=file\nPORT=9001\n")
    monkeypatch.setenv("KB_POOL_SIZE", "5")
    monkeypatch.setenv("ADMIN_TOKEN", "environment")  # upstream's name in the environment beats ours in the file
    monkeypatch.setenv("KB_PORT", "9002")
    gateway = GatewaySettings()
    assert (gateway.log_level, gateway.pool_size, gateway.port) == ("INFO", 5, 9002)
    assert gateway.admin_token is not None and gateway.admin_token.get_secret_value() == "environment"
    assert ServiceSettings().log_level == "INFO"
    (tmp_path / ".env").unlink()
    assert ServiceSettings().log_level == "WARNING"  # read when the settings are built, from the current directory


def test_upstreams_port_is_the_gateways_and_refused_beside_ours(monkeypatch):
    monkeypatch.setenv("PORT", "5000")
    assert GatewaySettings().port == 5000
    monkeypatch.setenv("PORT", "")  # upstream: `int(os.environ.get("PORT") or 8000)`
    assert GatewaySettings().port == 8000
    monkeypatch.setenv("PORT", "5000")
    monkeypatch.setenv("KB_PORT", "8001")
    with pytest.raises(ConflictingSettings, match="both KB_PORT and PORT"):
        GatewaySettings()
    assert ServiceSettings().pool_size == 8  # a service without a port of its own is not concerned


@pytest.mark.parametrize(("names", "public_url"), [
    ({"DISCORD_CLUSTER_MANAGER_API_BASE_URL": "https://kb.example.org/"}, "https://kb.example.org/"),
    ({"POPCORN_API_URL": "http://127.0.0.1:8000"}, "http://127.0.0.1:8000"),
    ({"HEROKU_APP_DEFAULT_DOMAIN_NAME": "kb-1a2b3c.herokuapp.com"}, "https://kb-1a2b3c.herokuapp.com"),
    ({"HEROKU_APP_DEFAULT_DOMAIN_NAME": "https://kb.example.org"}, "https://kb.example.org"),
    # upstream tries them in this order, an empty one counting as unset
    ({"DISCORD_CLUSTER_MANAGER_API_BASE_URL": "https://a.example", "POPCORN_API_URL": "http://b.example"},
     "https://a.example"),
    ({"HEROKU_APP_DEFAULT_DOMAIN_NAME": "c.herokuapp.com", "POPCORN_API_URL": "http://b.example"},
     "https://c.herokuapp.com"),
    ({"DISCORD_CLUSTER_MANAGER_API_BASE_URL": "", "POPCORN_API_URL": "http://b.example"}, "http://b.example"),
])
def test_upstreams_names_for_the_public_address(monkeypatch, names, public_url):
    for name, value in names.items():
        monkeypatch.setenv(name, value)
    assert GatewaySettings().public_url == DiscordSettings().public_url == public_url


@pytest.mark.parametrize("upstream", ["DISCORD_CLUSTER_MANAGER_API_BASE_URL", "POPCORN_API_URL",
                                      "HEROKU_APP_DEFAULT_DOMAIN_NAME"])
def test_the_public_address_named_both_ways_is_refused(monkeypatch, upstream):
    monkeypatch.setenv("KB_PUBLIC_URL", "https://ours.example")
    monkeypatch.setenv(upstream, "theirs.example")
    with pytest.raises(ConflictingSettings, match=f"both KB_PUBLIC_URL and {upstream}"):
        GatewaySettings()


def test_the_public_address_in_the_environment_beats_upstreams_in_the_file(monkeypatch, tmp_path):
    (tmp_path / ".env").write_text("POPCORN_API_URL=http://127.0.0.1:8000\n")
    assert GatewaySettings().public_url == "http://127.0.0.1:8000"
    monkeypatch.setenv("KB_PUBLIC_URL", "https://kb.example.org")
    assert GatewaySettings().public_url == "https://kb.example.org"


def test_the_services_kernelbot_up_starts_get_the_port_by_our_name_only(monkeypatch, tmp_path):
    monkeypatch.setenv("PORT", "3000")  # a developer's shell often has one, for another program
    up = Stack(data_dir=tmp_path, port=8000)
    up.database_url, up.nats_url = "postgresql://127.0.0.1/kb", "nats://127.0.0.1:4222"
    env = up.service_env()
    assert env["KB_PORT"] == "8000" and "PORT" not in env
