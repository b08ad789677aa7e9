"""One running platform for the backend tests: every service a subprocess, the dispatcher's GPU catalogue naming a
GPU per remote backend and behaviour, each remote backend a fake started here (GitHub, Buildkite, slurmrestd over
real HTTP; Modal at its client seam)."""

from __future__ import annotations

import json
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.kit.embedded import create_database, drop_database, start_nats
from services.kit.embedded.common import _run_sync
from tests.support.events import delete_all_streams
from tests.support.fakes import buildkite, github, modal, slurm
from tests.support.platform import Platform, identity_board

BOARD = "backends"
PREFIXES = {"modal": "md", "github": "gh", "buildkite": "bk", "slurm": "sl"}
BEHAVIOURS = ("run", "canned", "slow", "hang", "lost", "noresult", "refused", "ambiguous")
HANG_BUDGET_S = 3
ROOT = Path(__file__).resolve().parents[2]


def gpu(backend: str, behaviour: str) -> str:
    return f"{PREFIXES[backend]}-{behaviour}"


def _entry(backend: str, behaviour: str) -> dict:
    entry: dict = {"backend": backend, "arch": "90a"}
    if backend == "buildkite":
        entry["queues"] = [f"nvidia-{PREFIXES[backend]}{behaviour}-0", f"nvidia-{PREFIXES[backend]}{behaviour}-1"]
    else:
        entry["target"] = {"modal": "RunFake.run", "github": "nvidia_workflow.yml", "slurm": "gpu"}[backend]
    if backend == "github" and behaviour == "run":  # a workflow serving several runner kinds, as for AMD
        entry.update(target="amd_workflow.yml", queues=["amdgpu-mi300-x86-64"], arch=None)
    if behaviour == "hang":
        entry["max_job_s"] = HANG_BUDGET_S
    return entry


def catalogue(fakes: dict, shared_dir: Path) -> dict:
    return {
        "backends": {
            "modal": {"app": fakes["modal"].app},
            "github": {"repository": fakes["github"].full_name, "api_url": fakes["github"].url,
                       "request_spacing_s": 0, "write_spacing_s": 0},
            "buildkite": {"organization": "gpu-mode", "pipeline": "kernelbot-runner",
                          "api_url": f"{fakes['buildkite'].url}/v2"},
            "slurm": {"url": fakes["slurm"].url, "user": slurm.USER, "shared_dir": str(shared_dir),
                      "command": f"{sys.executable} -m runner.container --payload-file {{payload}} "
                                 f"--result {{result}}"},
        },
        "gpus": {gpu(b, behaviour): _entry(b, behaviour) for b in PREFIXES for behaviour in BEHAVIOURS},
    }


class BackendPlatform(Platform):
    def __init__(self, *args, extra_env: dict[str, str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.extra_env = extra_env

    def env(self) -> dict[str, str]:
        # Runners fetch payloads too large for their backend's field from this gateway, by single-use link.
        return super().env() | self.extra_env | {"KB_PAYLOAD_URL": self.url}


@dataclass
class World:
    platform: BackendPlatform
    fakes: dict
    cli: str
    database_url: str


@pytest.fixture(scope="module")
def world(postgres_server_url: str, _external_nats_url: str | None, tmp_path_factory: pytest.TempPathFactory):
    workdir = tmp_path_factory.mktemp("backends")
    fakes = {"github": github.FakeGithub(), "buildkite": buildkite.FakeBuildkite(), "slurm": slurm.FakeSlurm(),
             "modal": modal.FakeModal()}
    for fake in fakes.values():
        fake.start()
    name = f"kb_test_{uuid.uuid4().hex[:16]}"
    database_url = create_database(postgres_server_url, name)
    env = {
        "KB_GPU_CATALOGUE": json.dumps(catalogue(fakes, workdir / "shared")),
        "KB_GITHUB_TOKEN": github.TOKEN, "KB_BUILDKITE_TOKEN": buildkite.TOKEN, "KB_SLURM_TOKEN": slurm.TOKEN,
        "KB_MODAL_CLIENT": "tests.support.fakes.modal:stand_in", modal.URL_ENV: fakes["modal"].url,
        "KB_POLL_INTERVAL_S": "0.2", "KB_RETRY_BACKOFF_S": "0.2", "KB_MAX_ATTEMPTS": "2",
        "KB_LEASE_S": "2",
        "PYTHONPATH": str(ROOT),
    }
    nats_context = None
    if _external_nats_url is None:
        nats_context = start_nats(workdir / "nats")
        nats_url = nats_context.__enter__().url
    else:
        _run_sync(lambda: delete_all_streams(_external_nats_url))
        nats_url = _external_nats_url
    platform = BackendPlatform(nats_url, database_url, workdir, extra_env=env)
    try:
        platform.start()
        platform.add_boards(identity_board(BOARD, sorted(catalogue(fakes, workdir)["gpus"])))
        cli = platform.register("7001", "backend-tester")
        yield World(platform, fakes, cli, database_url)
    finally:
        platform.stop()
        for fake in fakes.values():
            for job in list(fake.jobs.jobs.values()):
                fake.jobs.cancel(job)
            fake.stop()
        if nats_context is not None:
            nats_context.__exit__(None, None, None)
        drop_database(postgres_server_url, name)
