"""The toolchain manifests (runner/toolchains/*.toml) and everything rendered from them: Modal's image, the two runner
Dockerfiles, the image-publishing workflow, the GitHub run workflows and update-image.sh (docs/toolchains.md)."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest
import yaml

from runner.task.toolchain import FAMILIES, HASH_ENV, ToolchainError, family_for_gpu, load, parse, refusal
from services.cli import toolchain_render
from services.cli.toolchain_render import published_image, render
from services.dispatcher.backends.registry import expected_toolchain
from services.dispatcher.catalogue import GpuEntry

REPO = Path(__file__).resolve().parents[2]


def module_constants(path: Path) -> dict:
    """The literal module-level assignments of a Python file, read without importing it (Modal is not here)."""
    found = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def workflow_image(name: str) -> str:
    [job] = yaml.safe_load((REPO / "deploy" / "github" / name).read_text())["jobs"].values()
    return job["env"]["KB_IMAGE"]


def test_every_rendered_file_matches_its_manifest():
    assert render(REPO) == [], "run `kernelbot toolchain render` and commit the result"


def test_the_check_names_a_file_edited_by_hand(tmp_path):
    for name in toolchain_render.targets():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    dockerfile = tmp_path / "deploy/runner/Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("torch==2.12.0", "torch==2.7.1"))
    app = tmp_path / "deploy/modal/app.py"
    app.write_text(app.read_text().replace('PYTHON_VERSION = "3.12"', 'PYTHON_VERSION = "3.11"'))
    assert render(tmp_path) == ["deploy/runner/Dockerfile", "deploy/modal/app.py"]
    assert render(tmp_path, write=True) and render(tmp_path) == []


def test_modal_s_image_is_the_nvidia_manifest():
    nvidia = load("nvidia")
    constants = module_constants(REPO / "deploy/modal/app.py")
    assert constants["BASE_IMAGE"] == nvidia.system["base_image"]
    assert constants["PYTHON_VERSION"] == nvidia.python
    assert constants["IMAGE_ENV"][HASH_ENV] == nvidia.sha256
    for line in nvidia.requirements():
        assert line in constants["PIP_COMMAND"]
    for header in nvidia.headers:
        assert any(header["repository"] in command and (header.get("tag") or header["commit"]) in command
                   for command in constants["SETUP_COMMANDS"])
    # The runner's own libraries at the versions of its hashed lock.
    locked = set(re.findall(r"(?m)^([A-Za-z0-9_.-]+==\S+)", (REPO / "deploy/requirements/runner.txt").read_text()))
    assert set(constants["RUNNER_REQUIREMENTS"]) <= locked


@pytest.mark.parametrize("family", FAMILIES)
def test_each_runner_dockerfile_carries_its_manifest(family):
    toolchain = load(family)
    text = (REPO / "deploy/runner" / toolchain_render.dockerfile_name(family)).read_text()
    assert f"FROM {toolchain.system['base_image']}\n" in text
    assert f"{HASH_ENV}={toolchain.sha256}" in text
    for line in toolchain.requirements():
        assert line in text
    for package in toolchain.system.get("apt", []):
        assert package in text
    for item in [*toolchain.headers, *toolchain.sources]:
        assert (item.get("tag") or item["commit"]) in text


def test_the_nvidia_image_profiles_with_the_ncu_that_gives_b200_counters():
    nvidia = load("nvidia")
    assert nvidia.system["ncu"] == "2025.2.1"  # not CUDA 13.3's bundled 2026.2 (NaN counters on B200)
    assert "nsight-compute-2025.2.1" in nvidia.system["apt"]
    assert "/opt/nvidia/nsight-compute/2025.2.1/ncu /usr/local/cuda/bin/ncu" in (REPO / "deploy/runner/Dockerfile").read_text()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_github_workflows_pull_the_prebuilt_image_of_their_manifest(family):
    image = workflow_image(f"{family}_workflow.yml")
    assert image == published_image(load(family))
    assert image.endswith(f":{family}-toolchain-{load(family).sha256[:12]}")


def test_the_publishing_workflow_tags_each_image_by_version_and_by_hash():
    [job] = yaml.safe_load((REPO / "deploy/github/publish_images.yml").read_text())["jobs"].values()
    matrix = job["strategy"]["matrix"]["include"]
    assert [(row["family"], row["version_tag"], row["hash_tag"]) for row in matrix] == \
        [(family, *load(family).image_tags()) for family in FAMILIES]
    pushes = " ".join(step.get("run", "") for step in job["steps"])
    assert "matrix.hash_tag" in pushes and "matrix.version_tag" in pushes and "docker push" in pushes


def test_update_image_pulls_the_published_hash_tags():
    text = (REPO / "deploy/buildkite/update-image.sh").read_text()
    for family in FAMILIES:
        assert f'{family.upper()}_TAG="{load(family).image_tags()[1]}"' in text
    assert f'PUBLISHED="{toolchain_render.PUBLISHED}"' in text


MANIFEST = """family = "nvidia"
version = "1"
python = "3.12"
languages = ["py"]
[system]
base_image = "x"
[pip]
torch = "{torch}"
[modules]
provided = ["torch"]
"""


def test_a_manifest_pins_exact_versions_and_its_hash_follows_its_content():
    one, other = parse(MANIFEST.format(torch="2.12.0"), "a"), parse(MANIFEST.format(torch="2.12.1"), "b")
    assert one.sha256 != other.sha256
    assert parse("# a comment\n" + MANIFEST.format(torch="2.12.0"), "c").sha256 == one.sha256
    for loose in (">=2.12", "2.*", ""):
        with pytest.raises(ToolchainError, match="pip.torch: pin one exact version"):
            parse(MANIFEST.format(torch=loose), "loose.toml")
    unpinned = MANIFEST.format(torch="2.12.0") + '[[headers]]\nname = "cutlass"\nrepository = "r"\ncommit = "main"\n'
    with pytest.raises(ToolchainError, match="cutlass: pin a tag or a full 40-hex commit"):
        parse(unpinned, "unpinned.toml")


def test_gpus_map_to_the_image_of_their_vendor():
    assert family_for_gpu("MI300x8", "github", "amd_workflow.yml") == "amd"
    assert family_for_gpu("MI355X", "github", "amd_workflow.yml") == "amd"
    assert family_for_gpu("amd-mi300", "buildkite", queues=["amd-mi300-0"]) == "amd"
    assert family_for_gpu("B200", "modal", "RunB200.run") == "nvidia"
    assert family_for_gpu("L4x4", "modal", "RunL4x4.run") == "nvidia"
    assert family_for_gpu("cpu", "local") is None
    assert expected_toolchain("MI300", GpuEntry(backend="github", target="amd_workflow.yml")) == load("amd").expected()
    assert expected_toolchain("H100", GpuEntry(backend="modal", target="RunH100.run")) == load("nvidia").expected()
    assert expected_toolchain("cpu", GpuEntry(backend="null")) is None


def test_a_runner_image_refuses_only_a_payload_meant_for_another_manifest():
    nvidia = load("nvidia")
    image = {"KB_TOOLCHAIN": "nvidia", HASH_ENV: nvidia.sha256}
    assert refusal(nvidia.expected(), image) is None
    assert refusal(None, image) is None  # a payload from a platform that does not say
    assert refusal(nvidia.expected(), {}) is None  # a runner outside an image (a Slurm venv)
    stale = {"KB_TOOLCHAIN": "nvidia", HASH_ENV: "0" * 64}
    line = refusal(nvidia.expected(), stale)
    assert line is not None and "\n" not in line
    assert f"nvidia-toolchain-{nvidia.sha256[:12]}" in line and "000000000000" in line
