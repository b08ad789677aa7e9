"""Upstream KernelBot's environment names are aliases of ours; a setting named both ways refuses to start."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from services.cli.up import Stack
from services.discord.settings import DiscordSettings
from services.dispatcher.catalogue import build_catalogue
from services.dispatcher.settings import DispatcherSettings
from services.gateway.settings import GatewaySettings
from services.kit.settings import ServiceSettings
from services.kit.upstream_env import ALIASES, ConflictingSettings, env_value

UPSTREAM = ("DATABASE_URL", "ADMIN_TOKEN", "DISCORD_TOKEN", "DISCORD_CLUSTER_STAGING_ID", "GITHUB_TOKEN",
            "PROBLEM_DEV_DIR", "HF_TOKEN", "HF_PUBLIC_DATASET", "HF_PRIVATE_DATASET", "CLI_DISCORD_CLIENT_ID", "CLI_DISCORD_CLIENT_SECRET",
            "CLI_GITHUB_CLIENT_ID", "CLI_GITHUB_CLIENT_SECRET", "CLI_TOKEN_URL", "GITHUB_REPO", "GITHUB_WORKFLOW_BRANCH",
            "PROBLEMS_REPO", "DISABLE_SSL", "DISCORD_DEBUG_TOKEN", "DISCORD_DEBUG_CLUSTER_STAGING_ID")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in list(os.environ):
        if name.upper().startswith("KB_") or name.upper() in UPSTREAM:
            monkeypatch.delenv(name)


def test_upstream_names_set_our_settings(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://db.example/kb")
    monkeypatch.setenv("ADMIN_TOKEN", "admin-secret")
    monkeypatch.setenv("DISCORD_TOKEN", "bot-secret")
    monkeypatch.setenv("DISCORD_CLUSTER_STAGING_ID", "1234")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    monkeypatch.setenv("GITHUB_TOKEN_BACKUP", "ghp-backup")
    monkeypatch.setenv("GITHUB_REPO", "gpu-mode/kernelbot")
    monkeypatch.setenv("PROBLEM_DEV_DIR", "/srv/problems")
    monkeypatch.setenv("CLI_GITHUB_CLIENT_ID", "gh-client")
    monkeypatch.setenv("CLI_GITHUB_CLIENT_SECRET", "gh-client-secret")
    gateway, bot, dispatcher = GatewaySettings(), DiscordSettings(), DispatcherSettings()
    assert ServiceSettings().database_url == gateway.database_url == "postgresql://db.example/kb"
    assert gateway.admin_token.get_secret_value() == "admin-secret"
    assert gateway.dev_problems_dir == bot.problems_dir == "/srv/problems"
    assert (gateway.oauth_github.client_id, gateway.oauth_github.client_secret.get_secret_value()) == (
        "gh-client", "gh-client-secret")
    assert gateway.oauth_github.token_url == "https://github.com/login/oauth/access_token"  # the rest kept
    assert bot.discord_token.get_secret_value() == "bot-secret" and bot.discord_guild_id == 1234
    assert dispatcher.github_token.get_secret_value() == "ghp-secret"
    assert dispatcher.github_token_backup.get_secret_value() == "ghp-backup"
    assert dispatcher.github_repository == "gpu-mode/kernelbot"


def test_the_rest_of_upstreams_env_carries_over(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://db.example/kb?application_name=x&sslmode=require")
    monkeypatch.setenv("DISABLE_SSL", "1")
    monkeypatch.setenv("CLI_DISCORD_CLIENT_ID", "dc-client")
    monkeypatch.setenv("CLI_TOKEN_URL", "https://discord.example/api/oauth2/token")
    monkeypatch.setenv("GITHUB_REPO", "gpu-mode/discord-cluster-manager")
    monkeypatch.setenv("GITHUB_WORKFLOW_BRANCH", "staging")
    monkeypatch.setenv("PROBLEMS_REPO", "gpu-mode/reference-kernels-fork")
    monkeypatch.setenv("DISCORD_DEBUG_TOKEN", "staging-bot")
    monkeypatch.setenv("DISCORD_DEBUG_CLUSTER_STAGING_ID", "5678")
    gateway, bot, dispatcher = GatewaySettings(), DiscordSettings(), DispatcherSettings()
    # upstream's DISABLE_SSL: SSL off for every connection the service makes from its database URL
    assert ServiceSettings().database_url == "postgresql://db.example/kb?application_name=x&sslmode=disable"
    assert (gateway.oauth_discord.client_id, gateway.oauth_discord.token_url) == (
        "dc-client", "https://discord.example/api/oauth2/token")
    assert (dispatcher.github_repository, dispatcher.github_ref) == ("gpu-mode/discord-cluster-manager", "staging")
    assert gateway.problems_repository == bot.problems_repository == "gpu-mode/reference-kernels-fork"
    assert (bot.discord_debug_token.get_secret_value(), bot.discord_debug_guild_id) == ("staging-bot", 5678)
    monkeypatch.setenv("DISABLE_SSL", "")  # upstream: set but empty keeps SSL
    assert "sslmode=require" in ServiceSettings().database_url


def test_the_github_repository_and_branch_fill_the_catalogue():

    gpus = json.dumps({"gpus": {"MI300": {"backend": "github", "target": "amd_workflow.yml"}}})
    github = build_catalogue(gpus, {}, [], github={"repository": "gpu-mode/kernelbot", "ref": "staging"}).backends.github
    assert (github.repository, github.ref) == ("gpu-mode/kernelbot", "staging")
    named = json.dumps({"backends": {"github": {"repository": "o/own", "ref": "main"}},
                        "gpus": {"MI300": {"backend": "github", "target": "amd_workflow.yml"}}})
    github = build_catalogue(named, {}, [], github={"repository": "gpu-mode/kernelbot", "ref": "staging"}).backends.github
    assert (github.repository, github.ref) == ("o/own", "main")  # the catalogue's own entry wins
    assert build_catalogue("", {"cpu": 1}, [], github={"ref": "staging"}).backends.github is None  # a branch alone: no backend


def test_our_names_alone_still_work(monkeypatch):
    monkeypatch.setenv("KB_DATABASE_URL", "postgresql://ours/kb")
    monkeypatch.setenv("KB_ADMIN_TOKEN", "ours")
    assert GatewaySettings().database_url == "postgresql://ours/kb"
    assert GatewaySettings().admin_token.get_secret_value() == "ours"


@pytest.mark.parametrize(("ours", "upstream", "settings"), [
    ("KB_DATABASE_URL", "DATABASE_URL", ServiceSettings),
    ("KB_ADMIN_TOKEN", "ADMIN_TOKEN", GatewaySettings),
    ("KB_DISCORD_TOKEN", "DISCORD_TOKEN", DiscordSettings),
    ("KB_DISCORD_GUILD_ID", "DISCORD_CLUSTER_STAGING_ID", DiscordSettings),
    ("KB_GITHUB_TOKEN", "GITHUB_TOKEN", DispatcherSettings),
    ("KB_GITHUB_TOKEN_BACKUP", "GITHUB_TOKEN_BACKUP", DispatcherSettings),
    ("KB_GITHUB_REPOSITORY", "GITHUB_REPO", DispatcherSettings),
    ("KB_HF_TOKEN", "HF_TOKEN", GatewaySettings),
    ("kb_github_token", "GITHUB_TOKEN", DispatcherSettings),  # ours are read case-insensitively
    ("KB_OAUTH_DISCORD", "CLI_DISCORD_CLIENT_ID", GatewaySettings),
    ("KB_OAUTH_DISCORD", "CLI_TOKEN_URL", GatewaySettings),
    ("KB_GITHUB_REPOSITORY", "GITHUB_REPO", DispatcherSettings),
    ("KB_GITHUB_REF", "GITHUB_WORKFLOW_BRANCH", DispatcherSettings),
    ("KB_PROBLEMS_REPOSITORY", "PROBLEMS_REPO", DiscordSettings),
    ("KB_PROBLEMS_REPOSITORY", "PROBLEMS_REPO", GatewaySettings),
    ("KB_DISABLE_SSL", "DISABLE_SSL", ServiceSettings),
    ("KB_DISCORD_DEBUG_TOKEN", "DISCORD_DEBUG_TOKEN", DiscordSettings),
    ("KB_DISCORD_DEBUG_GUILD_ID", "DISCORD_DEBUG_CLUSTER_STAGING_ID", DiscordSettings),
])
def test_a_setting_named_both_ways_is_refused(monkeypatch, ours, upstream, settings):
    monkeypatch.setenv(ours, '{"token_url": "t", "user_url": "u"}' if "OAUTH" in ours else "1")
    monkeypatch.setenv(upstream, "2")
    with pytest.raises(ConflictingSettings, match=f"both {ours.upper()} and {upstream}"):
        settings()


def test_an_alias_of_a_setting_a_service_lacks_is_not_its_concern(monkeypatch):
    """The scorer has no admin token: ADMIN_TOKEN next to KB_ADMIN_TOKEN is the gateway's problem, not its."""
    monkeypatch.setenv("KB_ADMIN_TOKEN", "1")
    monkeypatch.setenv("ADMIN_TOKEN", "2")
    assert ServiceSettings().database_url
    with pytest.raises(ConflictingSettings):
        GatewaySettings()


def test_every_alias_names_a_setting_we_have():
    fields = set()
    for settings in (ServiceSettings, GatewaySettings, DispatcherSettings, DiscordSettings):
        fields |= set(settings.model_fields)
    assert set(ALIASES) <= fields, set(ALIASES) - fields


def test_a_service_refuses_to_start_with_a_clear_error():
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("KB_") and k.upper() not in UPSTREAM}
    env |= {"KB_DATABASE_URL": "postgresql://127.0.0.1:1/none", "DATABASE_URL": "postgresql://127.0.0.1:1/other"}
    done = subprocess.run([sys.executable, "-m", "services.cli", "serve", "scorer"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0
    assert "kernelbot serve scorer: both KB_DATABASE_URL and DATABASE_URL" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_the_dispatcher_refuses_both_names_of_the_backup_github_token_in_one_line():
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("KB_") and k.upper() not in UPSTREAM}
    env |= {"KB_DATABASE_URL": "postgresql://127.0.0.1:1/none", "KB_GITHUB_TOKEN_BACKUP": "ghp-a",
            "GITHUB_TOKEN_BACKUP": "ghp-b"}
    done = subprocess.run([sys.executable, "-m", "services.cli", "serve", "dispatcher"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip() == ("kernelbot serve dispatcher: both KB_GITHUB_TOKEN_BACKUP and GITHUB_TOKEN_BACKUP "
                                   "(upstream KernelBot's name for it) are set; unset one of them"), done.stderr
    assert "ghp-a" not in done.stderr and "ghp-b" not in done.stderr


def test_kernelbot_up_takes_upstreams_database_url_as_ours(monkeypatch):

    monkeypatch.setenv("DATABASE_URL", "postgresql://upstream/kb")
    assert env_value("database_url") == "postgresql://upstream/kb"
    monkeypatch.setenv("KB_DATABASE_URL", "postgresql://ours/kb")
    with pytest.raises(ConflictingSettings, match="both KB_DATABASE_URL and DATABASE_URL"):
        env_value("database_url")
    monkeypatch.delenv("DATABASE_URL")
    assert env_value("database_url") == "postgresql://ours/kb"


def test_the_services_kernelbot_up_starts_get_the_database_by_our_name_only(monkeypatch, tmp_path):

    monkeypatch.setenv("DATABASE_URL", "postgresql://upstream/kb")
    up = Stack(data_dir=tmp_path, port=8000)
    up.database_url, up.nats_url = "postgresql://upstream/kb", "nats://127.0.0.1:4222"
    env = up.service_env()
    assert env["KB_DATABASE_URL"] == "postgresql://upstream/kb" and "DATABASE_URL" not in env
