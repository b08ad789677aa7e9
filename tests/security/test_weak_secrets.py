"""A service refuses to start with a placeholder or short admin token or session secret (docs/security.md,
"Registration and web sessions").

`kubectl apply -k` or a copied example used to give a public gateway whose admin token was `change-me`: anyone
reading the repository was an admin. Each service that holds one of these settings checks it at start, before it
connects to anything, and exits naming the setting.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import SecretStr

from services.discord.settings import DiscordSettings
from services.gateway.settings import GatewaySettings
from services.kit.settings import MIN_SECRET_LENGTH, WeakSecret, refuse_weak_secrets
from services.kit.upstream_env import UPSTREAM_NAMES
from tests.support.platform import ADMIN_TOKEN

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
STRONG = "Vq3p9sXk2LwZr8Tn4mYb6Hc1"
# Nothing listens here: a service that got as far as connecting would fail differently, and later.
NOWHERE = {"KB_DATABASE_URL": "postgresql://127.0.0.1:1/none", "KB_NATS_URL": "nats://127.0.0.1:1"}


def _serve(service: str, tmp_path: Path, **names: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("KB_") and k.upper() not in UPSTREAM_NAMES}
    return subprocess.run([sys.executable, "-m", "services.cli", "serve", service], cwd=tmp_path,
                          env={**env, "PYTHONPATH": str(REPO), **NOWHERE, **names}, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("service", "name", "value", "reason"), [
    ("gateway", "KB_ADMIN_TOKEN", "change-me", "is a placeholder value"),
    ("gateway", "KB_ADMIN_TOKEN", "CHANGE_ME", "is a placeholder value"),
    ("gateway", "KB_ADMIN_TOKEN", "change-me-before-deploying", "is a placeholder value"),
    ("gateway", "KB_ADMIN_TOKEN", "x" * 40, "is a placeholder value"),
    ("gateway", "KB_ADMIN_TOKEN", "hunter2", "is 7 characters long; it needs at least 16"),
    ("gateway", "ADMIN_TOKEN", "short-token", "is 11 characters long; it needs at least 16"),
    ("gateway", "KB_SESSION_SECRET", "change-me", "is a placeholder value"),
    ("gateway", "KB_SESSION_SECRET", "s3cr3t", "is 6 characters long; it needs at least 16"),
    ("discord", "KB_SESSION_SECRET", "change-me", "is a placeholder value"),
    ("discord", "KB_SESSION_SECRET", "0123456789", "is 10 characters long; it needs at least 16"),
], ids=lambda v: v if len(str(v)) < 30 else str(v)[:12])
def test_a_service_with_a_weak_secret_exits_naming_the_setting(tmp_path, service, name, value, reason):
    done = _serve(service, tmp_path, **{name: value})
    assert done.returncode != 0
    setting = "KB_ADMIN_TOKEN (or ADMIN_TOKEN)" if name.endswith("ADMIN_TOKEN") else name
    assert done.stderr.strip().splitlines()[-1].startswith(f"kernelbot serve {service}: {setting} {reason}"), \
        done.stderr
    assert value not in done.stderr  # the refusal does not print the secret it refuses


def test_unset_and_real_secrets_pass_and_the_test_suites_own_do():
    refuse_weak_secrets(GatewaySettings())  # unset: the admin routes are off, sessions use a per-process key
    refuse_weak_secrets(GatewaySettings(admin_token=SecretStr("")))
    for value in (STRONG, ADMIN_TOKEN, "discord-tests-session-secret", "profile-link-test-secret"):
        refuse_weak_secrets(GatewaySettings(admin_token=SecretStr(value), session_secret=SecretStr(value)))
        refuse_weak_secrets(DiscordSettings(session_secret=SecretStr(value)))
    assert len(ADMIN_TOKEN) >= MIN_SECRET_LENGTH
    with pytest.raises(WeakSecret, match="KB_SESSION_SECRET is 15 characters long"):
        refuse_weak_secrets(GatewaySettings(session_secret=SecretStr(STRONG[:15])))


def _applied_by_kustomize() -> list[dict]:
    """What `kubectl apply -k deploy/k8s` applies: kubectl renders it offline where it is installed."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    if not shutil.which("kubectl"):
        return [doc for resource in kustomization["resources"]
                for doc in yaml.safe_load_all((K8S / resource).read_text()) if doc]
    out = subprocess.run(["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def test_kubectl_apply_k_applies_no_secret_and_the_example_is_no_resource():
    applied = _applied_by_kustomize()
    assert [d["metadata"]["name"] for d in applied if d["kind"] == "Secret"] == []
    assert all("change-me" not in yaml.safe_dump(doc) for doc in applied)
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert not any("secret" in str(entry) for entry in kustomization["resources"]), kustomization["resources"]
    assert "secretGenerator" not in kustomization
    # the example names every key a workload reads, so an operator who fills it in misses none
    example = {(d["metadata"]["name"], key) for d in yaml.safe_load_all((K8S / "secret.example.yaml").read_text())
               if d for key in d["stringData"]}
    wanted = {(ref["name"], ref["key"]) for doc in applied for ref in _secret_refs(doc)}
    assert wanted and wanted <= example, wanted - example


def _secret_refs(node) -> list[dict]:
    if isinstance(node, dict):
        found = [node["secretKeyRef"]] if isinstance(node.get("secretKeyRef"), dict) else []
        return found + [ref for value in node.values() for ref in _secret_refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _secret_refs(value)]
    return []
