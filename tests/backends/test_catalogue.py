"""The GPU catalogue: which backend serves each GPU, read from configuration, refused with the entry at fault."""

from __future__ import annotations

import json

import pytest

from services.dispatcher.catalogue import CatalogueError, build_catalogue
from services.dispatcher.repository import ClaimedRun
from services.dispatcher.scheduler import Lane, job_budget_s

BACKENDS = {
    "modal": {"app": "kernelbot-runners"},
    "github": {"repository": "gpu-mode/kernelbot"},
    "buildkite": {"organization": "gpu-mode", "pipeline": "runner"},
    "slurm": {"url": "http://slurm:6820", "user": "kb", "shared_dir": "/shared"},
}


def test_a_yaml_file_maps_each_gpu_to_its_backend_target_and_arch(tmp_path):
    path = tmp_path / "gpus.yaml"
    path.write_text(
        "backends:\n"
        "  modal: {app: kernelbot-runners}\n"
        "  buildkite: {organization: gpu-mode, pipeline: runner}\n"
        "gpus:\n"
        "  H100: {backend: modal, target: run_h100, arch: '90a'}\n"
        "  nebius-H100: {backend: buildkite, queues: [nebius-h100-0, nebius-h100-1], arch: '90a'}\n"
    )
    catalogue = build_catalogue(str(path), {"cpu": 1}, ["bench"])
    assert catalogue.entry("H100").target == "run_h100" and catalogue.entry("H100").arch == "90a"
    assert catalogue.entry("nebius-H100").concurrent_runs() == 2  # one job per agent, one agent per queue
    assert catalogue.entry("cpu").backend == "local" and catalogue.entry("cpu").concurrent_runs() == 1
    assert catalogue.entry("bench").backend == "null"


def test_inline_json_works_too_and_an_explicit_entry_wins_over_the_simple_settings():
    source = json.dumps({"backends": BACKENDS, "gpus": {"cpu": {"backend": "local", "slots": 3},
                                                        "T4": {"backend": "modal", "target": "run_t4"}}})
    catalogue = build_catalogue(source, {"cpu": 1}, [])
    assert catalogue.entry("cpu").concurrent_runs() == 3
    assert catalogue.entry("T4").concurrent_runs() == 8


def test_no_catalogue_keeps_the_local_and_null_settings_working():
    catalogue = build_catalogue("", {"cpu": 2}, ["n1"])
    assert {name: e.backend for name, e in catalogue.gpus.items()} == {"cpu": "local", "n1": "null"}


@pytest.mark.parametrize(("gpus", "backends", "message"), [
    ({"T4": {"backend": "modal"}}, BACKENDS, "a modal GPU needs a target"),
    ({"B": {"backend": "buildkite"}}, BACKENDS, "needs at least one queue"),
    ({"B": {"backend": "buildkite", "queues": ["nvidia-h100-0", "H100-1"]}}, BACKENDS,
     "buildkite queue 'H100-1' must be {vendor}-{gpu}-{index}"),
    ({"B": {"backend": "buildkite", "queues": ["nvidia-h100"]}}, BACKENDS, "must be {vendor}-{gpu}-{index}"),
    ({"T4": {"backend": "modal", "target": "run_t4"}}, {}, "has no section under `backends`"),
    ({"T4": {"backend": "azure", "target": "x"}}, BACKENDS, "gpus.T4.backend"),
    ({"T4": {"backend": "modal", "target": "a"}, "t4": {"backend": "modal", "target": "b"}}, BACKENDS,
     "unique case-insensitively"),
    ({"T4": {"backend": "modal", "target": "a", "queue": "typo"}}, BACKENDS, "gpus.T4.queue"),
    ({"H100": {"backend": "agent"}}, {}, "an agent GPU names exactly one runner"),
    ({"H100": {"backend": "agent", "runners": ["a", "b"]}}, {}, "an agent GPU names exactly one runner"),
    ({"H100.x": {"backend": "agent", "runners": ["a"]}}, {}, "agent GPU 'H100.x'"),
    ({"b-c": {"backend": "agent", "runners": ["a"]}, "c": {"backend": "agent", "runners": ["a-b"]}}, {},
     "would share one job consumer"),
])
def test_a_broken_catalogue_is_refused_naming_the_entry(gpus, backends, message):
    with pytest.raises(CatalogueError, match="invalid GPU catalogue") as refused:
        build_catalogue(json.dumps({"backends": backends, "gpus": gpus}), {}, [])
    assert message in str(refused.value)


def test_an_agent_gpu_is_served_by_its_one_runner_one_run_per_agent_unless_slots_say_more():
    catalogue = build_catalogue(json.dumps({"gpus": {"H100": {"backend": "agent", "runners": ["h100"]},
                                                     "B200": {"backend": "agent", "runners": ["b"], "slots": 4}}}),
                                {}, [])
    assert catalogue.agent_queues() == {"H100": ("h100", "H100"), "B200": ("b", "B200")}
    assert [catalogue.entry(g).concurrent_runs() for g in ("H100", "B200")] == [1, 4]


def test_an_unreadable_catalogue_file_is_refused(tmp_path):
    with pytest.raises(CatalogueError, match="cannot read the GPU catalogue"):
        build_catalogue(str(tmp_path / "missing.yaml"), {}, [])


def test_the_job_budget_is_the_run_budget_capped_by_the_backend_ceiling():
    run = ClaimedRun(run_id="r", submission_id=1, gpu="T4", payload={}, timeout_s=900, status="queued",
                     attempts=1, job_ref=None)
    assert job_budget_s(run, Lane(backend=None, slots=1)) == 900
    assert job_budget_s(run, Lane(backend=None, slots=1, max_job_s=600)) == 600
    assert job_budget_s(run, Lane(backend=None, slots=1, max_job_s=3600)) == 900
