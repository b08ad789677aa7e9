"""Every gateway replica signs sessions and form tokens with the same key.

Without a configured KB_SESSION_SECRET each process makes up its own: behind a load balancer a person is signed out
whenever a request reaches another replica, and a form served by one is refused by the next (403). The deployment
files give every replica one secret; two gateways sharing the setting accept each other's cookies and forms.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.support.oauth_platform import OAuthPlatform, hidden_fields, oauth_platform

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"


def rendered_k8s() -> list[dict]:
    """What `kubectl apply -k deploy/k8s` would apply (kubectl renders it offline; else the listed resources)."""
    if shutil.which("kubectl"):
        out = subprocess.run(["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, timeout=60,
                             check=True).stdout
        return [doc for doc in yaml.safe_load_all(out) if doc]
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    return [doc for resource in kustomization["resources"]
            for doc in yaml.safe_load_all((K8S / resource).read_text()) if doc]


def _gateway_containers(doc: dict) -> list[dict]:
    if doc["kind"] not in ("Deployment", "StatefulSet", "DaemonSet"):
        return []
    return [c for c in doc["spec"]["template"]["spec"]["containers"]
            if c.get("command", [])[-2:] == ["serve", "gateway"]]


def test_every_kubernetes_gateway_replica_reads_one_session_secret():
    documents = rendered_k8s()
    # the Secrets are the operator's to create (deploy/k8s/secret.example.yaml), never applied with the rest
    created = [doc for doc in yaml.safe_load_all((K8S / "secret.example.yaml").read_text()) if doc]
    secrets = {(d["metadata"]["name"], key) for d in documents + created if d["kind"] == "Secret"
               for key in {**d.get("stringData", {}), **d.get("data", {})}}
    references, replicas = set(), 0
    for doc in documents:
        for container in _gateway_containers(doc):
            replicas += doc["spec"].get("replicas", 1)
            entries = [e for e in container.get("env", []) if e["name"] == "KB_SESSION_SECRET"]
            assert len(entries) == 1 and "value" not in entries[0], f"{doc['metadata']['name']}: {entries}"
            ref = entries[0].get("valueFrom", {}).get("secretKeyRef")
            assert ref is not None, f"{doc['metadata']['name']}: KB_SESSION_SECRET must come from a Secret"
            assert (ref["name"], ref["key"]) in secrets, ref
            references.add((ref["name"], ref["key"]))
    assert replicas >= 2
    assert len(references) == 1  # one key, whichever workload or pod serves the request


def test_the_compose_gateway_takes_the_secret_from_the_environment():
    services = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())["services"]
    gateways = [s for s in services.values() if s.get("command", [])[-2:] == ["serve", "gateway"]]
    assert gateways
    for service in gateways:
        assert service["environment"].get("KB_SESSION_SECRET", "").startswith("${KB_SESSION_SECRET:?")


@pytest.fixture(scope="module")
def two_gateways(postgres_server_url, _external_nats_url, tmp_path_factory) -> Iterator[tuple]:
    """Two gateway replicas on one platform, sharing a session secret; a third configured without one."""
    workdir = Path(tmp_path_factory.mktemp("replicas"))
    shared = {"KB_SESSION_SECRET": "one-secret-for-every-replica"}
    with oauth_platform(postgres_server_url, _external_nats_url, workdir, shared) as first:
        others = [OAuthPlatform(first.nats_url, first.database_url, workdir / name, first.fake, env)
                  for name, env in (("second", shared), ("alone", None))]
        try:
            for other in others:
                other.workdir.mkdir()
                other.start("gateway")
            yield first, *others
        finally:
            for other in others:
                other.stop()


@pytest.mark.slow
def test_replicas_with_the_secret_accept_each_others_sessions_and_forms(two_gateways):
    first, second, alone = two_gateways
    cli_id = first.register("replica-user", "replicated")
    with httpx.Client(timeout=30) as person:
        form = hidden_fields(person.get(f"{first.url}/web/login").text)
        # the form served by one replica is posted to another (a load balancer's choice)
        signed_in = person.post(f"{second.url}/web/login", data={**form, "cli_id": cli_id}, follow_redirects=False)
        assert signed_in.status_code == 303
        for replica in (first, second):
            assert 'id="viewer">replicated<' in person.get(f"{replica.url}/web/submissions").text
        # a gateway with a key of its own knows neither the session nor the form
        assert person.get(f"{alone.url}/web/submissions", follow_redirects=False).status_code == 303
        assert person.post(f"{alone.url}/web/login", data={**form, "cli_id": cli_id}).status_code == 403
