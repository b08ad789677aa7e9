"""From the GPU catalogue to the lanes the scheduler drives: one backend object per GPU name."""

from __future__ import annotations

from pathlib import Path

from runner.task.toolchain import family_for_gpu
from runner.task.toolchain import load as load_toolchain
from services.dispatcher.backends.agent import AgentBackend, AgentJobs
from services.dispatcher.backends.base import Backend
from services.dispatcher.backends.carry import PayloadLinks
from services.dispatcher.backends.local import LocalBackend
from services.dispatcher.backends.null import NullBackend
from services.dispatcher.catalogue import Catalogue, GpuEntry
from services.dispatcher.scheduler import Lane
from services.dispatcher.settings import DispatcherSettings


def _secret(value) -> str | None:
    return value.get_secret_value() if value is not None else None


def _backend(gpu: str, entry: GpuEntry, catalogue: Catalogue, settings: DispatcherSettings, shared: dict,
             links: PayloadLinks | None, agent_jobs: AgentJobs | None) -> Backend:
    config = catalogue.backends
    poll = settings.poll_interval_s
    if entry.backend == "agent":
        if agent_jobs is None:
            raise ValueError(f"GPU {gpu!r} is served by runner agents, which need the job queue")
        return AgentBackend(agent_jobs, entry.runners[0], gpu, poll)
    if entry.backend == "local":
        if "local" not in shared:
            shared["local"] = LocalBackend(Path(settings.runs_dir or Path.home() / ".kernelbot" / "runs"),
                                           warm=settings.warm_runner)
        return shared["local"]
    if entry.backend == "null":
        return shared.setdefault("null", NullBackend())
    if entry.backend == "modal":
        # each backend imported when a catalogue entry names it: their clients (modal, PyGithub) are heavy
        from services.dispatcher.backends.modal import ModalBackend, modal_lookups

        from_name, from_id, cls_from_name = modal_lookups(settings.modal_client)
        return ModalBackend(config.modal.app, entry.target, poll, environment=config.modal.environment,
                            from_name=from_name, from_id=from_id, cls_from_name=cls_from_name)
    if entry.backend == "github":
        # as above: imported when named
        from services.dispatcher.backends.github import GithubBackend

        return GithubBackend(config.github, entry.target, _secret(settings.github_token), poll,
                             runner_label=entry.queues[0] if entry.queues else None, links=links,
                             backup_token=_secret(settings.github_token_backup))
    if entry.backend == "buildkite":
        # as above: imported when named
        from services.dispatcher.backends.buildkite import BuildkiteBackend

        return BuildkiteBackend(config.buildkite, entry.queues, _secret(settings.buildkite_token), poll, links=links)
    # as above: imported when named
    from services.dispatcher.backends.slurm import SlurmBackend

    return SlurmBackend(config.slurm, entry.target, _secret(settings.slurm_token), poll, entry.max_job_s)


def expected_toolchain(gpu: str, entry: GpuEntry) -> str | None:
    """The image a GPU's runs need (runner/task/toolchain.py): by its vendor family, none for local and null GPUs."""
    family = family_for_gpu(gpu, entry.backend, entry.target, entry.queues)
    return None if family is None else load_toolchain(family).expected()


def build_lanes(catalogue: Catalogue, settings: DispatcherSettings, links: PayloadLinks | None = None,
                agent_jobs: AgentJobs | None = None) -> dict[str, Lane]:
    """`links` (None: every payload inline) lets GitHub and Buildkite hand large payloads over by reference;
    `agent_jobs` is the job queue of the GPUs runner agents serve."""
    shared: dict = {}
    return {
        gpu: Lane(backend=_backend(gpu, entry, catalogue, settings, shared, links, agent_jobs),
                  slots=entry.concurrent_runs(),
                  arch=entry.arch, max_job_s=entry.max_job_s, toolchain=expected_toolchain(gpu, entry))
        for gpu, entry in catalogue.gpus.items()
    }
