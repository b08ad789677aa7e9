"""Upstream's GPU names out of the box: each default entry serves runs once its backend's credentials are there,
`kernelbot runners` names what every other one lacks, and an operator's catalogue still overrides any entry."""

from __future__ import annotations

import json
from pathlib import Path

import asyncpg
import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.dispatcher.catalogue import build_catalogue
from services.dispatcher.default_gpus import (
    BUILDKITE_TOKEN_LACKS,
    GITHUB_GPUS,
    GITHUB_REPOSITORY_LACKS,
    GITHUB_TOKEN_LACKS,
    MODAL_GPUS,
    MODAL_LACKS,
    Credentials,
    default_catalogue,
    modal_token_present,
)
from tests.support.events import query
from tests.support.platform import Platform

MODAL = ("T4", "L4", "A100", "H100", "B200", "L4x4")
GITHUB = ("NVIDIA", "B200_Nebius", "MI300", "MI250", "MI300x8", "MI355X")
BUILDKITE = ("nvidia-H100", "amd-MI300", "nebius-H100")


def catalogue(credentials: Credentials, source: str = ""):
    return build_catalogue(source, {"cpu": 1}, [],
                           lambda backends, taken: default_catalogue(credentials, backends, taken))


def test_with_a_modal_token_only_the_modal_gpus_serve_and_every_other_entry_says_what_it_lacks():
    found = catalogue(Credentials(modal=True))
    assert {name: (e.backend, e.target, e.arch) for name, e in found.gpus.items() if name != "cpu"} == {
        "T4": ("modal", "RunT4.run", "75"), "L4": ("modal", "RunL4.run", "89"), "A100": ("modal", "RunA100.run", "80"),
        "H100": ("modal", "RunH100.run", "90a"), "B200": ("modal", "RunB200.run", "100"),
        "L4x4": ("modal", "RunL4x4.run", "89")}
    assert found.backends.modal.app == "kernelbot-runners" and found.backends.github is None
    assert set(found.inactive) == set(GITHUB) | set(BUILDKITE)
    assert found.inactive["MI300x8"].target == "amd_workflow.yml"
    assert found.inactive["MI300"].lacks == f"{GITHUB_TOKEN_LACKS} and {GITHUB_REPOSITORY_LACKS}"
    assert found.inactive["amd-MI300"].lacks.startswith(f"{BUILDKITE_TOKEN_LACKS} and its agents' queues (amd-mi300-0")


def test_github_and_buildkite_defaults_serve_once_their_credentials_and_places_are_set():
    found = catalogue(Credentials(github_token=True, github_repository="gpu-mode/kernelbot", buildkite_token=True,
                                  buildkite_queues=("amd-mi300-0", "amd-mi300-1", "acme-mi355x-0")))
    assert found.entry("MI300").queues == ("amdgpu-mi300-x86-64",) and found.entry("MI355X").queues == (
        "arc-runner-set",)
    assert found.entry("B200_Nebius").target == "helion_workflow.yml" and found.entry("B200_Nebius").arch == "100"
    assert found.backends.github.repository == "gpu-mode/kernelbot"
    assert found.entry("amd-MI300").queues == ("amd-mi300-0", "amd-mi300-1")
    assert found.entry("amd-MI300").concurrent_runs() == 2
    assert found.entry("acme-MI355X").queues == ("acme-mi355x-0",)  # a vendor outside the guide's examples
    assert found.backends.buildkite.pipeline == "kernelbot-runner"
    assert set(found.inactive) == set(MODAL) | {"nvidia-H100", "nebius-H100"}
    assert found.inactive["T4"].lacks == MODAL_LACKS


def test_the_operators_catalogue_overrides_any_entry_and_its_backend_sections():
    source = json.dumps({"backends": {"github": {"repository": "acme/runners", "ref": "prod"}},
                         "gpus": {"mi300": {"backend": "github", "target": "mine.yml"}}})
    found = catalogue(Credentials(modal=True, github_token=True), source)
    assert "MI300" not in found.gpus and "MI300" not in found.inactive
    assert found.entry("mi300").target == "mine.yml"
    assert found.backends.github.repository == "acme/runners" and found.backends.github.ref == "prod"
    assert found.entry("MI300x8").backend == "github"  # the default entries use the operator's repository


def test_modal_s_config_file_counts_as_its_credentials(tmp_path: Path):
    config = tmp_path / "modal.toml"
    config.write_text('[default]\ntoken_id = "ak-1"\ntoken_secret = "as-1"\nactive = true\n')
    assert modal_token_present({"MODAL_CONFIG_PATH": str(config)})
    assert not modal_token_present({"MODAL_CONFIG_PATH": str(tmp_path / "absent.toml")})
    assert not modal_token_present({"MODAL_TOKEN_ID": "ak-1", "MODAL_CONFIG_PATH": str(tmp_path / "absent.toml")})


def _announced(database_url: str) -> bool:
    try:
        return query(database_url, "SELECT count(*) AS n FROM dispatch_gpus")[0]["n"] > 1
    except asyncpg.UndefinedTableError:  # the dispatcher has not applied the migrations yet
        return False


@pytest.fixture
def dispatcher_with_a_modal_token(nats_url: str, database_url: str, tmp_path: Path):
    platform = Platform(nats_url, database_url, tmp_path, extra_env={
        "MODAL_TOKEN_ID": "ak-test", "MODAL_TOKEN_SECRET": "as-test",
        "MODAL_CONFIG_PATH": str(tmp_path / "no-modal.toml")})
    try:
        platform.start("dispatcher")
        platform.wait_for(lambda: _announced(database_url), "the dispatcher's announcement of its GPUs", timeout=60)
        yield platform
    finally:
        platform.stop()


def test_kernelbot_runners_lists_the_modal_gpus_active_and_what_each_other_entry_lacks(
        dispatcher_with_a_modal_token, database_url: str):
    done = CliRunner().invoke(app, ["runners"], env={"KB_DATABASE_URL": database_url})
    assert done.exit_code == 0, done.output
    active, _, inactive = done.stdout.partition("\ninactive:")
    rows = {line.split()[0]: line.split() for line in active.splitlines()[2:] if line.strip()}
    assert set(rows) == set(MODAL) | {"cpu"}, done.stdout
    assert all(rows[name][1] == "modal" for name in MODAL) and rows["H100"][2] == "RunH100.run"
    lacking = {line.split()[0]: line for line in inactive.splitlines()[1:] if line.strip()}
    assert set(lacking) == set(GITHUB) | set(BUILDKITE), done.stdout
    for name in GITHUB:
        assert f"github     lacks {GITHUB_TOKEN_LACKS} and {GITHUB_REPOSITORY_LACKS}" in lacking[name]
    for name in BUILDKITE:
        assert f"buildkite  lacks {BUILDKITE_TOKEN_LACKS} and its agents' queues" in lacking[name]


def test_every_default_target_is_deployed_by_this_repository():

    repo = Path(__file__).resolve().parents[2]
    app_source = (repo / "deploy" / "modal" / "app.py").read_text()
    for target, _ in MODAL_GPUS.values():
        assert f"class {target.split('.')[0]}(WarmRunner)" in app_source, target
    for workflow, _, _ in GITHUB_GPUS.values():
        assert (repo / "deploy" / "github" / workflow).is_file(), workflow

    def job(name: str) -> list[str]:  # the job, the runner label aside
        text = (repo / "deploy" / "github" / name).read_text()
        return [line for line in text[text.index("\njobs:"):].splitlines() if "runs-on:" not in line]

    assert job("helion_workflow.yml") == job("nvidia_workflow.yml")  # the Helion route is the NVIDIA job
    assert "runs-on: nebius-b200-helion-runners" in (repo / "deploy" / "github" / "helion_workflow.yml").read_text()
