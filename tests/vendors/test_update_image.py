"""`update-image.sh` and `update-image.sh --auto` (from cron) on a host of two GPU agents, with docker and systemctl
as recording stand-ins: pull, then restart agents; --auto restarts only idle agents and only for a changed image."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from runner.task.toolchain import load
from services.cli.toolchain_render import published_image
from tests.support.fakes.host import REPO, FakeHost

UPDATE = REPO / "scripts" / "buildkite" / "update-image.sh"
SETUP = REPO / "scripts" / "buildkite" / "setup-agent.sh"
# The image published for this checkout's NVIDIA manifest, by its hash (docs/toolchains.md).
IMAGE = published_image(load("nvidia"))
LOCAL = "kernelbot-runner:latest"


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    host = FakeHost(tmp_path)
    host.write_token("bkat_x")
    for index in (0, 1):
        done = subprocess.run([str(SETUP), str(index), f"nvidia-h100-{index}", "32G", "16", "--root", str(host.root)],
                              env=host.env(), capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    host.publish_image(IMAGE, "sha256:aaa")
    host.clear_calls()
    return host


def update(host: FakeHost, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(UPDATE), *args, "--root", str(host.root)], env=host.env(), capture_output=True,
                          text=True, timeout=60, check=False)


def restarts(host: FakeHost) -> list[str]:
    return [argv[1] for argv in host.argvs("systemctl") if argv[0] == "restart"]


def test_update_pulls_tags_and_restarts_every_agent(host):
    done = update(host)
    assert done.returncode == 0, done.stderr
    assert ["pull", "--quiet", IMAGE] in host.argvs("docker")
    assert host.image_id(LOCAL) == "sha256:aaa"
    assert restarts(host) == ["buildkite-agent-gpu0.service", "buildkite-agent-gpu1.service"]


def test_auto_restarts_nothing_when_the_image_did_not_change(host):
    assert update(host, "--auto").returncode == 0  # first run: every agent takes the image
    host.clear_calls()
    done = update(host, "--auto")
    assert done.returncode == 0, done.stderr
    assert ["pull", "--quiet", IMAGE] in host.argvs("docker")  # it does look
    assert restarts(host) == []
    assert "runner image unchanged" in done.stdout


def test_auto_restarts_only_idle_agents_and_the_busy_one_on_a_later_run(host):
    assert update(host, "--auto").returncode == 0
    host.publish_image(IMAGE, "sha256:bbb")  # a new image is released
    host.job_running(1)
    host.clear_calls()

    done = update(host, "--auto")
    assert done.returncode == 0, done.stderr
    assert host.image_id(LOCAL) == "sha256:bbb"  # the next job of every agent takes the new image
    assert restarts(host) == ["buildkite-agent-gpu0.service"]  # GPU 1 is mid-run: never cut short
    assert "buildkite-agent-gpu1.service is running a job" in done.stdout
    assert ["ps", "--quiet", "--filter", "label=kernelbot.gpu-index=1"] in host.argvs("docker")

    host.job_running(1, False)  # its job ended; cron runs again, the image has not changed since
    host.clear_calls()
    assert update(host, "--auto").returncode == 0
    assert restarts(host) == ["buildkite-agent-gpu1.service"]

    host.clear_calls()
    assert update(host, "--auto").returncode == 0
    assert restarts(host) == []  # every agent now runs with sha256:bbb


def test_an_unknown_option_is_refused_and_a_failed_pull_restarts_nothing(host):
    done = update(host, "--bogus")
    assert done.returncode == 2 and "unknown option --bogus" in done.stderr
    done = update(host, "--auto", "--image", "ghcr.io/gpu-mode/missing:latest")
    assert done.returncode != 0
    assert restarts(host) == []


def test_an_amd_node_pulls_the_image_of_the_amd_manifest(host):
    amd = published_image(load("amd"))
    assert amd.endswith(load("amd").image_tags()[1]) and amd != IMAGE
    host.publish_image(amd, "sha256:rocm")
    done = update(host, "--family", "amd")
    assert done.returncode == 0, done.stderr
    assert ["pull", "--quiet", amd] in host.argvs("docker")
    assert host.image_id(LOCAL) == "sha256:rocm"
    done = update(host, "--family", "intel")
    assert done.returncode == 2 and "--family must be nvidia or amd" in done.stderr
