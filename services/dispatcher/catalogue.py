"""The GPU catalogue (docs/vendors.md): which backend serves each GPU name, where, and for which architecture.

Configuration, not code: `KB_GPU_CATALOGUE` names a YAML or JSON file (or holds the JSON itself) of the shape

    backends:                      # connection settings shared by the GPUs of a backend (tokens stay in KB_*_TOKEN)
      modal: {app: kernelbot-runners}
      github: {repository: gpu-mode/kernelbot, ref: main}
      buildkite: {organization: gpu-mode, pipeline: kernelbot-runner}
      slurm: {url: http://slurm:6820, user: kernelbot, shared_dir: /shared/kernelbot}
    gpus:
      H100: {backend: modal, target: run_h100, arch: "90a"}
      MI300: {backend: github, target: amd_workflow.yml, arch: null}
      nebius-H100: {backend: buildkite, queues: [nebius-h100-0, nebius-h100-1], arch: "90a", runners: [nebius]}
      H100: {backend: agent, runners: [h100], slots: 4, arch: "90a"}
      X1: {backend: agent, runners: [x1], peak: {bandwidth_gbs: 4000, tflops: {fp16: 1200, fp32: 90}}}

`runners` names the runner identities (NATS users `runner-<name>`) whose own reports of runs on that GPU are taken
(services/dispatcher/runner_reports.py); a GPU without it takes results only through its backend. An `agent` GPU is
served by runner agents on GPU hosts (runner/agent.py) that pull its jobs under that one runner identity and report
every result themselves: it names exactly one runner, and `slots` says how many agents serve it (default 1).
`peak` states a GPU's peak bandwidth and compute for the roofline floor where services/core/rules/gpu_peaks.py does not
know it (or knows another variant).

`KB_LOCAL_GPUS` and `KB_NULL_GPUS` keep working: they add `local` and `null` entries. Pure: no I/O but reading the
file named by the setting.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from schemas.streams import runner_job_consumer
from services.core.rules.gpu_peaks import GpuPeak

BackendKind = Literal["local", "null", "modal", "github", "buildkite", "slurm", "agent"]
REMOTE_KINDS = ("modal", "github", "buildkite", "slurm")
# Remote schedulers queue jobs themselves; this many runs per GPU are in flight at once unless configured.
DEFAULT_REMOTE_SLOTS = 8
NULL_SLOTS = 64  # the null backend has no GPU to protect
RUNNER_NAME = re.compile(r"[A-Za-z0-9_-]+")
# A Buildkite queue is one agent, i.e. one GPU: `{vendor}-{gpu}-{index}` (deploy/buildkite/setup-agent.sh checks the
# same rule on the host, so a catalogue typo cannot send runs to a queue no agent serves).
BUILDKITE_QUEUE = re.compile(r"[a-z0-9]+-[a-z0-9]+-[0-9]+")


class CatalogueError(ValueError):
    """The catalogue cannot be used; the message names the entry and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GpuEntry(_Strict):
    backend: BackendKind
    # modal: function name; github: workflow file; slurm: partition. Buildkite uses `queues`.
    target: str = ""
    queues: tuple[str, ...] = ()
    arch: str | None = None
    slots: int | None = Field(default=None, ge=1)
    # The backend's own ceiling on one job (a Modal function's timeout, a cluster's time limit), if lower than
    # the budget derived from the problem.
    max_job_s: int | None = Field(default=None, ge=1)
    # Runner identities (their NATS user's name below `runner.`) whose own reports of runs on this GPU are taken.
    runners: tuple[str, ...] = ()
    # The device's peaks for the roofline floor, where the built-in table (services/core/rules/gpu_peaks.py) lacks them.
    peak: GpuPeak | None = None

    @model_validator(mode="after")
    def _target_present(self) -> GpuEntry:
        for runner in self.runners:
            if not RUNNER_NAME.fullmatch(runner):
                raise ValueError(f"runner name {runner!r} must be letters, digits, '-' or '_' (one NATS subject token)")
        if self.backend in ("modal", "github", "slurm") and not self.target:
            raise ValueError(f"a {self.backend} GPU needs a target")
        if self.backend == "agent" and len(self.runners) != 1:
            raise ValueError("an agent GPU names exactly one runner, whose agents pull its jobs")
        if self.backend == "buildkite" and not self.queues:
            raise ValueError("a buildkite GPU needs at least one queue")
        if self.backend == "buildkite":
            for queue in self.queues:
                if not BUILDKITE_QUEUE.fullmatch(queue):
                    raise ValueError(f"buildkite queue {queue!r} must be {{vendor}}-{{gpu}}-{{index}} in lower-case "
                                     f"letters and digits, e.g. nvidia-h100-0")
        return self

    def concurrent_runs(self) -> int:
        if self.slots is not None:
            return self.slots
        if self.backend == "buildkite":
            return len(self.queues)  # one agent per queue, one job per agent
        if self.backend == "null":
            return NULL_SLOTS
        return 1 if self.backend in ("local", "agent") else DEFAULT_REMOTE_SLOTS


class ModalConfig(_Strict):
    app: str = "kernelbot-runners"
    environment: str | None = None


class GithubConfig(_Strict):
    repository: str
    ref: str = "main"
    api_url: str = "https://api.github.com"
    # How long after a dispatch the run it started may take to show up in the run list.
    find_run_s: float = 60.0
    # PyGithub's pacing between requests and between writes (GitHub asks for at least a second between writes).
    request_spacing_s: float = 0.25
    write_spacing_s: float = 1.0


class BuildkiteConfig(_Strict):
    organization: str
    pipeline: str
    api_url: str = "https://api.buildkite.com/v2"
    branch: str = "main"


class SlurmConfig(_Strict):
    url: str
    user: str
    api_version: str = "v0.0.40"
    # Storage the cluster's nodes and the dispatcher both mount: payloads go in, result.json files come out.
    shared_dir: str
    # What a job runs; {payload} and {result} are replaced by file paths under shared_dir.
    command: str = "python -m runner.container --payload-file {payload} --result {result}"
    account: str | None = None


class Backends(_Strict):
    modal: ModalConfig | None = None
    github: GithubConfig | None = None
    buildkite: BuildkiteConfig | None = None
    slurm: SlurmConfig | None = None


class InactiveGpu(_Strict):
    """A default entry whose backend lacks credentials: shown to operators, serving nothing."""

    backend: BackendKind
    target: str
    arch: str | None
    lacks: str


class DefaultEntries(Protocol):
    backends: dict
    gpus: dict[str, dict]
    inactive: dict[str, InactiveGpu]


# (the operator's `backends` sections, the lower-case names already defined) -> the default entries to add
DefaultsFor = Callable[[dict, set[str]], DefaultEntries]


class Catalogue(_Strict):
    backends: Backends = Backends()
    gpus: dict[str, GpuEntry] = {}
    inactive: dict[str, InactiveGpu] = {}

    @model_validator(mode="after")
    def _consistent(self) -> Catalogue:
        seen: dict[str, str] = {}
        for name, entry in self.gpus.items():
            if name.lower() in seen:
                raise ValueError(f"GPU names must be unique case-insensitively: {seen[name.lower()]!r} and {name!r}")
            seen[name.lower()] = name
            if entry.backend in REMOTE_KINDS and getattr(self.backends, entry.backend) is None:
                raise ValueError(f"GPU {name!r} uses {entry.backend}, which has no section under `backends`")
            if entry.backend == "agent" and not RUNNER_NAME.fullmatch(name):
                raise ValueError(f"agent GPU {name!r}: its name is part of a NATS subject and a consumer name, so "
                                 f"letters, digits, '-' or '_' only")
        consumers: dict[str, str] = {}
        for name, (runner, gpu) in self.agent_queues().items():
            other = consumers.setdefault(runner_job_consumer(runner, gpu).lower(), name)
            if other != name:
                raise ValueError(f"agent GPUs {other!r} and {name!r} would share one job consumer; rename one")
        return self

    def entry(self, gpu: str) -> GpuEntry:
        return self.gpus[gpu]

    def agent_queues(self) -> dict[str, tuple[str, str]]:
        """Every agent GPU with its runner: (runner, GPU) names its job subject and consumer (schemas/streams.py)."""
        return {name: (entry.runners[0], name) for name, entry in self.gpus.items()
                if entry.backend == "agent" and entry.runners}


def _read_source(source: str) -> dict:
    text = source.strip()
    if not text:
        return {}
    if not text.startswith("{"):
        path = Path(text).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CatalogueError(f"cannot read the GPU catalogue {path}: {exc}") from exc
    try:
        data = yaml.safe_load(text)  # JSON is YAML
    except yaml.YAMLError as exc:
        raise CatalogueError(f"the GPU catalogue is not valid YAML/JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogueError("the GPU catalogue must be a mapping with `backends` and `gpus`")
    return data


def build_catalogue(source: str, local_gpus: dict[str, int], null_gpus: list[str],
                    defaults: DefaultsFor | None = None, github: dict[str, str] | None = None) -> Catalogue:
    """The catalogue from its configured source plus the local and null GPUs of the simple settings; the GitHub
    repository and ref of KB_GITHUB_REPOSITORY / KB_GITHUB_REF (upstream's GITHUB_REPO, GITHUB_WORKFLOW_BRANCH) where
    the catalogue's `backends.github` leaves them out; and the `defaults` (services/dispatcher/default_gpus.py)
    under every name those leave free."""
    data = _read_source(source)
    given = {key: value for key, value in (github or {}).items() if value}
    if given and ("repository" in given or (data.get("backends") or {}).get("github")):
        backends = dict(data.get("backends") or {})
        backends["github"] = {**given, **(backends.get("github") or {})}
        data = {**data, "backends": backends}
    gpus = dict(data.get("gpus") or {})
    for name, slots in local_gpus.items():
        gpus.setdefault(name, {"backend": "local", "slots": slots})
    for name in null_gpus:
        gpus.setdefault(name, {"backend": "null"})
    backends = data.get("backends") or {}
    inactive: dict[str, InactiveGpu] = {}
    if defaults is not None and isinstance(backends, dict):
        added = defaults(backends, {str(name).lower() for name in gpus})
        gpus.update(added.gpus)
        backends = {**added.backends, **backends}
        inactive = added.inactive
    try:
        return Catalogue.model_validate({"backends": backends, "gpus": gpus, "inactive": inactive})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise CatalogueError(f"invalid GPU catalogue: {problems}") from exc
