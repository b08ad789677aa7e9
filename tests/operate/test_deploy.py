"""The deployment files parse, and name only images, settings, commands and files that exist."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import typer
import yaml

from runner.agent import SETTINGS as AGENT_SETTINGS
from schemas.streams import MAX_EVENT_BYTES, RUNNER_JOBS, runner_inbox_prefix
from services.cli.main import SERVICE_NAMES, app
from services.cli.service_settings import settings_classes
from services.kit.embedded import find_nats_server

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OUR_IMAGE = "kernelbot"
RUNNER_IMAGE = "kernelbot-runner"  # deploy/runner/Dockerfile, for GPU hosts
INFRASTRUCTURE = {"nats:2.10-alpine": ("NATS_",), "postgres:16-alpine": ("POSTGRES_", "PGDATA")}
NATS_CONFIGS = (DEPLOY / "nats" / "cluster.conf", DEPLOY / "k8s" / "nats-cluster.conf")
ROUTE_CERTIFICATES = "./nats/route-tls"  # deploy/nats/route-certs.sh makes them, never committed
AGENT_COMMAND = ["python", "-m", "runner.agent"]


def known_settings() -> set[str]:
    names = set()
    for value in settings_classes().values():
        names |= {f"KB_{field.upper()}" for field in value.model_fields}
    return names


def check_command(argv: list[str]) -> None:
    """`kernelbot <subcommand ...>` resolving in the real CLI, or `python -m <module>` that imports."""
    if argv[:2] == ["python", "-m"]:
        assert importlib.util.find_spec(argv[2]) is not None, argv
        return
    assert argv[0] == "kernelbot", argv
    command = typer.main.get_command(app)
    words = list(argv[1:])
    while hasattr(command, "commands") and words and words[0] in command.commands:
        command = command.commands[words.pop(0)]
    assert not hasattr(command, "commands"), f"{argv}: not a command"
    if command.name == "serve":
        assert words and words[0] in SERVICE_NAMES, argv
    else:
        command.make_context(command.name, words, resilient_parsing=False)


def check_environment(image: str, names: list[str], command: list[str] | None = None) -> None:
    settings = set(AGENT_SETTINGS) if command == AGENT_COMMAND else known_settings()
    for name in names:
        if image.split(":")[0] in (OUR_IMAGE, RUNNER_IMAGE):
            assert name in settings, f"{name} is not a setting of services/kit/settings.py"
        else:
            assert name.startswith(INFRASTRUCTURE[image]), f"{image} has no setting {name}"


def test_compose_file_names_only_what_exists():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert {"nats-1", "nats-2", "nats-3", "postgres", "ledger", "dispatcher", "scorer", "gateway", "runner",
            "discord"} <= set(services)
    for name, service in services.items():
        image = service["image"]
        command = service.get("entrypoint", service.get("command"))
        if image.split(":")[0] in (OUR_IMAGE, RUNNER_IMAGE):
            assert (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]).is_file()
            check_command(command)
        else:
            assert image in INFRASTRUCTURE, f"{name}: unknown image {image}"
        if image.split(":")[0] == RUNNER_IMAGE:
            assert service["build"]["dockerfile"] == "deploy/runner/Dockerfile" and command == AGENT_COMMAND, name
        check_environment(image, list(service.get("environment", {})), command)
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source == ROUTE_CERTIFICATES:  # the operator's, made by the script beside the NATS config
                assert (DEPLOY / "nats" / "route-certs.sh").is_file(), name
            elif source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name} mounts {source}, which does not exist"
    assert all(service["deploy"]["replicas"] >= 2 for name, service in services.items()
               if name in ("dispatcher", "scorer"))


def _documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def test_kubernetes_manifests_name_only_what_exists():
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    documents = []
    for resource in kustomization["resources"]:
        documents += _documents(DEPLOY / "k8s" / resource)
    for generator in kustomization.get("configMapGenerator", []):
        for entry in generator["files"]:
            assert (DEPLOY / "k8s" / entry.split("=")[-1]).is_file()
    # the Secrets are the operator's to create, shaped as the example that is no resource
    created = _documents(DEPLOY / "k8s" / "secret.example.yaml")
    secrets = {k for d in documents + created if d["kind"] == "Secret" for k in d["stringData"]}
    config = {k for d in documents if d["kind"] == "ConfigMap" for k in d["data"]}
    check_environment(OUR_IMAGE, sorted(config))
    replicas = {}
    for doc in documents:
        if doc["kind"] not in ("Deployment", "StatefulSet"):
            continue
        replicas[doc["metadata"]["name"]] = doc["spec"]["replicas"]
        for container in doc["spec"]["template"]["spec"]["containers"]:
            image = container["image"]
            assert image in (OUR_IMAGE, RUNNER_IMAGE) or image in INFRASTRUCTURE, image
            assert image != RUNNER_IMAGE or container["command"] == AGENT_COMMAND, container
            if image in (OUR_IMAGE, RUNNER_IMAGE):
                check_command(container["command"] + container.get("args", []))
            check_environment(image, [e["name"] for e in container.get("env", [])], container.get("command"))
            for entry in container.get("env", []):
                ref = entry.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in secrets, ref
    assert all(replicas[name] >= 2 for name in ("dispatcher", "scorer", "gateway")), replicas
    assert replicas["nats"] == 3
    assert replicas["discord"] == 1  # a second bot would only compete for the same interactions


@pytest.mark.parametrize("config", NATS_CONFIGS, ids=lambda p: p.name)
def test_nats_configuration_is_valid_and_sized_for_a_1_mb_submission(config, tmp_path):
    # distinct values: the route variables hold one URL each, and a route listed twice is refused
    env = os.environ | {name: f"secret-{name.lower()}" for name in re.findall(r"\$(NATS_\w+)", config.read_text())}
    # the route certificates where the deployments mount them, made here by the script the operator runs
    subprocess.run(["sh", str(DEPLOY / "nats" / "route-certs.sh"), str(tmp_path / "tls")], check=True,
                   capture_output=True, timeout=60)
    copy = tmp_path / config.name
    copy.write_text(config.read_text().replace("/etc/nats-route-tls/", f"{tmp_path / 'tls'}/"))
    checked = subprocess.run([str(find_nats_server()), "-t", "-c", str(copy)], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    text = config.read_text()
    assert int(re.search(r"max_payload:\s*(\d+)", text).group(1)) >= MAX_EVENT_BYTES
    # each runner user may publish below its own name, pull and acknowledge from its own job consumers, and
    # receive below its own inbox prefix only
    runners = re.findall(r"user: runner-(\w+).*?publish: \{ allow: \[(.*?)\] \}.*?subscribe: \{ allow: \[(.*?)\] \}",
                         text, flags=re.S)
    assert runners
    for name, published, subscribed in runners:
        first, *pulls = [s.strip(' "\n') for s in published.split(",")]
        assert first == f"runner.{name}.>"
        consumers = {re.sub(r"^\$JS\.(API\.CONSUMER\.MSG\.NEXT|ACK)\.", "", s).removesuffix(".>") for s in pulls}
        assert all(c.startswith(f"{RUNNER_JOBS.name}.{name}-") for c in consumers), pulls
        assert len(pulls) == 2 * len(consumers)
        assert [s.strip(' "') for s in subscribed.split(",")] == [f"{runner_inbox_prefix(name)}.>"]


def test_the_operations_guide_uses_only_commands_that_exist(tmp_path, monkeypatch):
    guide = (ROOT / "docs" / "operations.md").read_text()
    commands = re.findall(r"^\s*(?:\$ )?(kernelbot [^\n|#]+?)\s*(?:#.*)?$", guide, flags=re.M)
    assert len(commands) >= 10
    monkeypatch.chdir(tmp_path)
    (tmp_path / "events.jsonl").touch()  # the file an import reads must exist
    for line in commands:
        check_command(shlex.split(line))
