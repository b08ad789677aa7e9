"""GPU hosts hold no platform credential (docs/security.md): the shipped manifests, rendered as Kubernetes and
Docker Compose would (kustomization's resources; compose's YAML anchors and merge keys resolved), give a runner pod
or service no way to the database, the services' NATS login, a token or a session secret, whether by env, envFrom,
a mounted volume or the pod's service account; its one credential is its own runner user's NATS password.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
COMPOSE = ROOT / "deploy" / "compose.yaml"
# What names a platform credential, whatever holds it.
PLATFORM_NAME = re.compile(r"^KB_(DATABASE_URL|NATS_URL|ADMIN_TOKEN|SESSION_SECRET|.*TOKEN.*|.*SECRET.*|OAUTH.*)$|"
                           r"^(POSTGRES_PASSWORD|NATS_SERVICES_PASSWORD|NATS_SYSTEM_PASSWORD|DATABASE_URL)$")
PLATFORM_VALUE = re.compile(r"postgres(ql)?://|nats://services[:@]|\$\{?(POSTGRES_PASSWORD|NATS_SERVICES_PASSWORD|"
                            r"NATS_SYSTEM_PASSWORD|KB_ADMIN_TOKEN|KB_\w*TOKEN|KB_\w*SECRET\w*)")
RUNNER_SECRET = re.compile(r"^kernelbot-runner-[a-z0-9-]+$")
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod")


def kubernetes_documents() -> list[dict]:
    """The kustomization's resources, and the Secrets the operator creates beside them (as the example shapes them)."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    return [doc for resource in [*kustomization["resources"], "secret.example.yaml"]
            for doc in yaml.safe_load_all((K8S / resource).read_text()) if doc]


def _pod_spec(doc: dict) -> dict:
    template = doc["spec"]["jobTemplate"]["spec"]["template"] if doc["kind"] == "CronJob" else \
        doc["spec"].get("template", doc)
    return template["spec"]


def _is_runner_pod(doc: dict) -> bool:
    """On a GPU node, or running the runner: either way on the GPU side of the boundary."""
    spec = _pod_spec(doc)
    commands = [" ".join(c.get("command", []) + c.get("args", [])) for c in spec["containers"]]
    return doc["metadata"]["name"].startswith("runner") or "kernelbot.dev/gpu" in spec.get("nodeSelector", {}) \
        or any("runner" in command for command in commands)


def kubernetes_runner_problems(documents: list[dict]) -> list[str]:
    secrets = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Secret"}
    config_maps = {d["metadata"]["name"]: d.get("data", {}) for d in documents if d["kind"] == "ConfigMap"}
    runners = [d for d in documents if d["kind"] in WORKLOADS and _is_runner_pod(d)]
    problems = [] if runners else ["no runner workload found"]

    def secret_ok(name: str, where: str) -> None:
        if not RUNNER_SECRET.fullmatch(name) or name not in secrets:
            problems.append(f"{where} reads Secret {name!r}, which is not a runner identity's own")
            return
        for key, value in secrets[name].get("stringData", {}).items():
            if PLATFORM_NAME.match(key) or PLATFORM_VALUE.search(str(value)):
                problems.append(f"{where}: runner Secret {name!r} holds {key}, a platform credential")

    for doc in runners:
        spec, name = _pod_spec(doc), doc["metadata"]["name"]
        if spec.get("automountServiceAccountToken") is not False:
            problems.append(f"{name} mounts a Kubernetes API token (automountServiceAccountToken is not false)")
        for volume in spec.get("volumes", []):
            sources = [volume] + volume.get("projected", {}).get("sources", [])
            for source in sources:
                if "secret" in source:
                    secret_ok(source["secret"].get("secretName", source["secret"].get("name", "")), name)
                if "serviceAccountToken" in source:
                    problems.append(f"{name} mounts a service account token")
        for container in spec["containers"] + spec.get("initContainers", []):
            where = f"{name}/{container['name']}"
            for source in container.get("envFrom", []):
                if "secretRef" in source:
                    secret_ok(source["secretRef"]["name"], where)
                if "configMapRef" in source:
                    data = config_maps.get(source["configMapRef"]["name"], {})
                    problems += [f"{where} gets {key} from ConfigMap {source['configMapRef']['name']}"
                                 for key, value in data.items()
                                 if PLATFORM_NAME.match(key) or PLATFORM_VALUE.search(str(value))]
            for entry in container.get("env", []):
                if PLATFORM_NAME.match(entry["name"]) or PLATFORM_VALUE.search(str(entry.get("value", ""))):
                    problems.append(f"{where} has {entry['name']}, a platform credential")
                source = entry.get("valueFrom", {})
                if "secretKeyRef" in source:
                    secret_ok(source["secretKeyRef"]["name"], where)
                if "configMapKeyRef" in source:
                    key = source["configMapKeyRef"]["key"]
                    value = config_maps.get(source["configMapKeyRef"]["name"], {}).get(key, "")
                    if PLATFORM_NAME.match(key) or PLATFORM_VALUE.search(str(value)):
                        problems.append(f"{where} reads {key} from a ConfigMap, a platform credential")
    return problems


def compose_runner_problems(compose: dict) -> list[str]:
    services = compose["services"]
    runners = {n: s for n, s in services.items()
               if n.startswith("runner") or "runner" in " ".join(map(str, s.get("command", [])))}
    problems = [] if runners else ["no runner service found"]
    for name, service in runners.items():
        environment = service.get("environment", {})
        if isinstance(environment, list):
            environment = dict(item.partition("=")[::2] for item in environment)
        own = _password_variable(f"runner-{environment.get('KB_RUNNER_NAME')}", ROOT / "deploy" / "nats" / "cluster.conf")
        for key, value in environment.items():
            if PLATFORM_NAME.match(key) or PLATFORM_VALUE.search(str(value)):
                problems.append(f"{name} has {key}={value}, a platform credential")
            problems += [f"{name} has {key}={value}: {variable} is not its own runner user's password"
                         for variable in re.findall(r"\$\{?(\w+)", str(value)) if variable != own]
        if service.get("env_file"):
            problems.append(f"{name} reads an env_file, which may hold anything")
        if service.get("secrets"):
            problems.append(f"{name} mounts compose secrets {service['secrets']}")
        for volume in service.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            if source.startswith((".", "/")):
                problems.append(f"{name} mounts {source} from the host")
    return problems


def test_no_kubernetes_runner_pod_can_reach_a_platform_credential():
    assert kubernetes_runner_problems(kubernetes_documents()) == []


def test_no_compose_runner_can_reach_a_platform_credential():
    assert compose_runner_problems(yaml.safe_load(COMPOSE.read_text())) == []


def _password_variable(user: str, config: Path) -> str | None:
    found = re.findall(rf"user: {re.escape(user)}, password: \$(\w+)", config.read_text())
    return found[0] if found else None


def _nats_user_of(password_variable: str, config: Path) -> str:
    [user] = re.findall(rf"user: ([\w-]+), password: \${password_variable}\b", config.read_text())
    return user


def test_a_kubernetes_runner_logs_in_as_its_own_runner_user():
    """The password the runner pod reads is the one the NATS pods give that runner's user, not the services'."""
    documents = kubernetes_documents()
    nats = next(d for d in documents if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "nats")
    nats_env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in _pod_spec(nats)["containers"][0]["env"]
                if "secretKeyRef" in e.get("valueFrom", {})}
    for doc in documents:
        if doc["kind"] in WORKLOADS and _is_runner_pod(doc):
            env = {e["name"]: e for e in _pod_spec(doc)["containers"][0]["env"]}
            ref = env["KB_RUNNER_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"]
            [variable] = [name for name, source in nats_env.items() if source == ref]
            assert _nats_user_of(variable, K8S / "nats-cluster.conf") == f"runner-{env['KB_RUNNER_NAME']['value']}"


def test_a_compose_runner_logs_in_as_its_own_runner_user():
    compose = yaml.safe_load(COMPOSE.read_text())
    environment = compose["services"]["runner"]["environment"]
    variable = re.fullmatch(r"\$\{(\w+)\}", environment["KB_RUNNER_NATS_PASSWORD"]).group(1)
    assert _nats_user_of(variable, ROOT / "deploy" / "nats" / "cluster.conf") == \
        f"runner-{environment['KB_RUNNER_NAME']}"


def test_the_check_catches_a_compose_runner_given_another_password():
    compose = yaml.safe_load(COMPOSE.read_text())
    compose["services"]["runner"]["environment"]["KB_EXTRA"] = "${NATS_RUNNER_NEBIUS_PASSWORD}"
    assert compose_runner_problems(compose) != []


@pytest.mark.parametrize("leak", ["env", "envFrom", "volume", "token"])
def test_the_check_catches_each_way_a_credential_could_reach_a_runner_pod(leak):
    """The checker itself: a runner pod handed the platform Secret each way is caught."""
    documents = kubernetes_documents()
    runner = next(d for d in documents if d["kind"] in WORKLOADS and _is_runner_pod(d))
    spec = _pod_spec(runner)
    container = spec["containers"][0]
    if leak == "env":
        container["env"].append({"name": "KB_DATABASE_URL", "valueFrom": {"secretKeyRef": {
            "name": "kernelbot-secrets", "key": "KB_DATABASE_URL"}}})
    elif leak == "envFrom":
        container["envFrom"] = [{"secretRef": {"name": "kernelbot-secrets"}}]
    elif leak == "volume":
        spec["volumes"] = [{"name": "s", "secret": {"secretName": "kernelbot-secrets"}}]
    else:
        spec["automountServiceAccountToken"] = True
    assert kubernetes_runner_problems(documents) != []
