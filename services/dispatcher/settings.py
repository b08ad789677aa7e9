"""The dispatcher's settings (env: KB_ and the field name). Built at start-up and passed down."""

from __future__ import annotations

from pydantic import SecretStr

from services.kit.settings import ServiceSettings


class DispatcherSettings(ServiceSettings):
    # GPU name -> concurrent local runs. One job per GPU is the fair default.
    local_gpus: dict[str, int] = {"cpu": 1}
    # Catalogue names served by the in-process null backend (benchmarks of the platform itself).
    null_gpus: list[str] = []
    runs_dir: str = ""
    # Local runs fork their harness processes from a warm runner holding torch imported (runner/warm.py).
    warm_runner: bool = True
    launch_allowance_s: int = 60
    max_attempts: int = 3
    worker_id: str = ""
    # The GPU catalogue (services/dispatcher/catalogue.py): a YAML/JSON file path, or the JSON itself.
    gpu_catalogue: str = ""
    # How often remote jobs are polled, and the first delay before an infrastructure failure is retried.
    poll_interval_s: float = 5.0
    retry_backoff_s: float = 2.0
    # How long a dispatcher's claim on a run lasts without renewal: a dead replica's runs wait this long.
    lease_s: float = 30.0
    github_token: SecretStr | None = None
    # Used while GitHub rate-limits the first token (upstream: GITHUB_TOKEN_BACKUP).
    github_token_backup: SecretStr | None = None
    # The GitHub backend's repository (owner/name) and workflow branch where the catalogue's `backends.github` does
    # not name them (upstream: GITHUB_REPO, GITHUB_WORKFLOW_BRANCH); the default GitHub GPUs dispatch there.
    github_repository: str = ""
    github_ref: str = ""
    # Upstream's GPU names and the vendor guide's Buildkite GPUs out of the box (default_gpus.py); false: only the
    # catalogue's entries and the local and null GPUs.
    default_gpus: bool = True
    # The vendors' Buildkite agent queues (`amd-mi300-0`, ...): the default Buildkite GPUs group them by prefix.
    buildkite_queues: list[str] = []
    buildkite_token: SecretStr | None = None
    slurm_token: SecretStr | None = None
    # "module:attr" naming a stand-in for modal's Function.from_name / FunctionCall.from_id (tests only).
    modal_client: str = ""
    # The gateway's URL as runners reach it: payloads too large for a GitHub input or a Buildkite variable are
    # handed over as a single-use link below it (services/dispatcher/backends/carry.py). Empty: inline only.
    payload_url: str = ""
    # How long such a link lives: longer than a job may wait in its backend's queue.
    payload_link_ttl_s: float = 7200.0
