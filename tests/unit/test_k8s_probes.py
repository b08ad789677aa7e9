"""Every Kubernetes manifest probes liveness on /health (which asks nothing of Postgres or NATS) and readiness on
/ready, so a database restart takes replicas out of the balancer and never restarts them all."""

from __future__ import annotations

from pathlib import Path

import yaml

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"


def containers():
    for manifest in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(manifest.read_text()):
            spec = (doc or {}).get("spec", {}).get("template", {}).get("spec", {})
            for container in spec.get("containers", []):
                if container.get("image") == "kernelbot":
                    yield manifest.name, container


def test_kernelbot_containers_probe_liveness_on_health_and_readiness_on_ready():
    found = list(containers())
    assert len(found) >= 5
    for name, container in found:
        live, ready = container.get("livenessProbe", {}), container.get("readinessProbe", {})
        assert live.get("httpGet", {}).get("path") == "/health", name
        assert ready.get("httpGet", {}).get("path") == "/ready", name
        assert live["httpGet"]["port"] == ready["httpGet"]["port"], name
