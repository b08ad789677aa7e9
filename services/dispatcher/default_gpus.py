"""Upstream KernelBot's GPU names out of the box (docs/vendors.md, "GPU names out of the box").

Every name upstream routes (T4 ... B200 and L4x4 on Modal; NVIDIA, B200_Nebius and the AMD kinds on GitHub) plus the
Buildkite GPUs of the vendor guide's queue naming (`{vendor}-{gpu}-{index}`) has a default entry. An entry serves
runs only when its backend's credentials are there; otherwise it is kept as inactive, with what it lacks, for
`kernelbot runners`. An operator's catalogue entry of the same name (case-insensitive) replaces the default, and an
operator's `backends` section replaces the default section. Pure, but for `credentials_of`, which reads the
environment and Modal's config file at start-up.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from services.dispatcher.catalogue import BUILDKITE_QUEUE, Catalogue, InactiveGpu, build_catalogue

MODAL_APP = "kernelbot-runners"
BUILDKITE_PIPELINE = {"organization": "gpu-mode", "pipeline": "kernelbot-runner"}
# Upstream's Modal GPUs and the warm functions of deploy/modal/app.py that serve them.
MODAL_GPUS = {"T4": ("RunT4.run", "75"), "L4": ("RunL4.run", "89"), "A100": ("RunA100.run", "80"),
              "H100": ("RunH100.run", "90a"), "B200": ("RunB200.run", "100"), "L4x4": ("RunL4x4.run", "89")}
# Upstream's GitHub GPUs: workflow, runner label (for workflows serving several runner kinds), arch.
GITHUB_GPUS = {
    "NVIDIA": ("nvidia_workflow.yml", None, None),
    "B200_Nebius": ("helion_workflow.yml", None, "100"),  # Helion boards on Nebius's B200 runners
    "MI300": ("amd_workflow.yml", "amdgpu-mi300-x86-64", None),
    "MI250": ("amd_workflow.yml", "amdgpu-mi250-x86-64", None),
    "MI300x8": ("amd_workflow.yml", "amdgpu-mi300-8-x86-64", None),
    "MI355X": ("amd_workflow.yml", "arc-runner-set", None),
}
# The vendor guide's examples; queues of other `{vendor}-{gpu}` prefixes in KB_BUILDKITE_QUEUES add their own.
BUILDKITE_PREFIXES = ("nvidia-h100", "amd-mi300", "nebius-h100")
ARCH_OF_MODEL = {"t4": "75", "l4": "89", "a100": "80", "h100": "90a", "h200": "90a", "b200": "100"}

MODAL_LACKS = "MODAL_TOKEN_ID and MODAL_TOKEN_SECRET (or a token in Modal's config file)"
GITHUB_TOKEN_LACKS = "KB_GITHUB_TOKEN (or GITHUB_TOKEN)"
GITHUB_REPOSITORY_LACKS = "KB_GITHUB_REPOSITORY (or GITHUB_REPO, or backends.github in KB_GPU_CATALOGUE)"
BUILDKITE_TOKEN_LACKS = "KB_BUILDKITE_TOKEN"


@dataclass(frozen=True)
class Credentials:
    """What the dispatcher was given: which backends it can reach, and where."""

    modal: bool = False
    github_token: bool = False
    github_repository: str = ""
    buildkite_token: bool = False
    buildkite_queues: tuple[str, ...] = ()


@dataclass(frozen=True)
class Defaults:  # catalogue.DefaultEntries
    backends: dict
    gpus: dict[str, dict]
    inactive: dict[str, InactiveGpu]


def modal_token_present(environ: Mapping[str, str]) -> bool:
    """Modal's client takes MODAL_TOKEN_ID and MODAL_TOKEN_SECRET, else a profile of its config file
    (MODAL_CONFIG_PATH, default ~/.modal.toml) holding token_id and token_secret."""
    if environ.get("MODAL_TOKEN_ID") and environ.get("MODAL_TOKEN_SECRET"):
        return True
    path = Path(environ.get("MODAL_CONFIG_PATH") or Path(environ.get("HOME") or "~").expanduser() / ".modal.toml")
    try:
        profiles = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return any(isinstance(p, dict) and p.get("token_id") and p.get("token_secret") for p in profiles.values())


def credentials_of(settings, environ: Mapping[str, str] | None = None) -> Credentials:
    """The credentials of DispatcherSettings `settings` and of Modal's own environment."""
    return Credentials(modal=modal_token_present(os.environ if environ is None else environ),
                       github_token=settings.github_token is not None,
                       github_repository=settings.github_repository,
                       buildkite_token=settings.buildkite_token is not None,
                       buildkite_queues=tuple(settings.buildkite_queues))


def buildkite_name(prefix: str) -> str:
    """`amd-mi300` -> `amd-MI300`, the name deploy/buildkite/setup-agents.sh prints for the catalogue."""
    vendor, _, model = prefix.partition("-")
    return f"{vendor}-{model.upper()}"


def _buildkite_groups(queues: tuple[str, ...]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {prefix: [] for prefix in BUILDKITE_PREFIXES}
    for queue in queues:
        if BUILDKITE_QUEUE.fullmatch(queue):
            groups.setdefault(re.sub(r"-[0-9]+$", "", queue), []).append(queue)
    return groups


def default_catalogue(credentials: Credentials, operator_backends: dict, taken: set[str]) -> Defaults:
    """The default entries not `taken` (lower-case names the operator or the simple settings define), split into
    active entries (catalogue dicts, with the backend sections they need) and inactive ones with what they lack."""
    backends: dict = {}
    gpus: dict[str, dict] = {}
    inactive: dict[str, InactiveGpu] = {}

    def add(name: str, entry: dict, section: str, config: dict, lacks: list[str]) -> None:
        if name.lower() in taken:
            return
        if lacks:
            target = entry.get("target") or ",".join(entry.get("queues", []))
            inactive[name] = InactiveGpu(backend=entry["backend"], target=target, arch=entry.get("arch"),
                                         lacks=" and ".join(lacks))
            return
        gpus[name] = entry
        backends.setdefault(section, operator_backends.get(section) or config)

    modal_lacks = [] if credentials.modal else [MODAL_LACKS]
    for name, (target, arch) in MODAL_GPUS.items():
        add(name, {"backend": "modal", "target": target, "arch": arch}, "modal", {"app": MODAL_APP}, modal_lacks)

    repository = (operator_backends.get("github") or {}).get("repository") or credentials.github_repository
    github_lacks = [lack for lack, missing in ((GITHUB_TOKEN_LACKS, not credentials.github_token),
                                               (GITHUB_REPOSITORY_LACKS, not repository)) if missing]
    for name, (workflow, label, arch) in GITHUB_GPUS.items():
        entry = {"backend": "github", "target": workflow, "arch": arch, **({"queues": [label]} if label else {})}
        add(name, entry, "github", {"repository": repository}, github_lacks)

    for prefix, queues in _buildkite_groups(credentials.buildkite_queues).items():
        lacks = [lack for lack, missing in (
            (BUILDKITE_TOKEN_LACKS, not credentials.buildkite_token),
            (f"its agents' queues ({prefix}-0, {prefix}-1, ...) in KB_BUILDKITE_QUEUES", not queues)) if missing]
        entry = {"backend": "buildkite", "queues": queues or [f"{prefix}-0"],
                 "arch": ARCH_OF_MODEL.get(prefix.partition("-")[2])}
        add(buildkite_name(prefix), entry, "buildkite", BUILDKITE_PIPELINE, lacks)
    return Defaults(backends, gpus, inactive)


def configured_catalogue(settings, source: str | None = None) -> Catalogue:
    """The catalogue as the dispatcher builds it from its settings: the operator's (KB_GPU_CATALOGUE, or `source`
    in its place), the local and null GPUs, and upstream's names under every name those leave free unless
    KB_DEFAULT_GPUS is off. The dispatcher and `kernelbot problems check` both resolve GPU names with it."""
    credentials = credentials_of(settings)
    defaults = (lambda backends, taken: default_catalogue(credentials, backends, taken)) \
        if settings.default_gpus else None
    return build_catalogue(settings.gpu_catalogue if source is None else source, settings.local_gpus,
                           settings.null_gpus, defaults,
                           {"repository": settings.github_repository, "ref": settings.github_ref})
