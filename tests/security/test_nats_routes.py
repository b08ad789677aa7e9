"""The NATS cluster's routes (docs/security.md): a server joins the cluster only with the route password and a
certificate of the cluster's own CA; anything less reads nothing of the cluster and writes nothing into it.

Three real nats-servers run a SHIPPED configuration (deploy/nats/cluster.conf with deploy/compose.yaml's environment,
deploy/k8s/nats-cluster.conf with deploy/k8s/nats.yaml's), moved onto this machine's loopback: the ports, the data
directory, the certificate directory and each node's host name in the route URLs are changed, nothing else. The
certificates come from deploy/nats/route-certs.sh. A fourth server, the attacker's, runs the same configuration with
one credential missing and accounts of its own, and tries the review's exploit: listen on everything, publish a
forged event. A fourth server with both credentials shows that the test would see a join.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nats
import pytest
import yaml

from services.kit.embedded import find_nats_server, free_port
from tests.support.shipped_nats import terminate

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SECRET = b"SECRET-route-probe"
FORGED = b"FORGED-by-the-rogue"
ROUTE_URL = re.compile(r"(nats-route://)(?:[^@\s,\]\"]*@)?([\w.-]+):6222")
# how long a rogue gets to join: a route retries every second, and the honest fourth node joins in well under this
ROGUE_WAIT_S = 4.0


def compose_environment(secrets_: dict[str, str], server_name: str) -> dict[str, str]:
    """The NATS servers' environment as deploy/compose.yaml gives it, `${NAME...}` filled from secrets_."""
    shipped = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["x-nats-env"]
    fill = lambda value: re.sub(r"\$\{(\w+)[^}]*\}", lambda m: secrets_[m.group(1)], str(value))  # noqa: E731
    return {name: fill(value) for name, value in shipped.items()} | {"NATS_SERVER_NAME": server_name}


def kubernetes_environment(secrets_: dict[str, str], server_name: str) -> dict[str, str]:
    """The NATS pods' environment as deploy/k8s/nats.yaml gives it: each secret key read from secrets_ by its
    variable's name, `$(NAME)` expanded as the kubelet does, the pod's name as the server's."""
    documents = yaml.safe_load_all((DEPLOY / "k8s" / "nats.yaml").read_text())
    [stateful] = [d for d in documents if d and d["kind"] == "StatefulSet"]
    [container] = stateful["spec"]["template"]["spec"]["containers"]
    env: dict[str, str] = {}
    for entry in container["env"]:
        source = entry.get("valueFrom", {})
        if "fieldRef" in source:
            env[entry["name"]] = server_name
        elif "secretKeyRef" in source:
            env[entry["name"]] = secrets_[entry["name"]]
        else:
            env[entry["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], entry["value"])
    return env


@dataclass(frozen=True)
class Shape:
    config: Path
    environment: Callable[[dict[str, str], str], dict[str, str]]


SHAPES = {"compose": Shape(DEPLOY / "nats" / "cluster.conf", compose_environment),
          "kubernetes": Shape(DEPLOY / "k8s" / "nats-cluster.conf", kubernetes_environment)}


def hosts(shape: Shape) -> list[str]:
    """The cluster's node names, in order, as its route URLs name them (in the file, or in the environment)."""
    text = shape.config.read_text() + "\n".join(shape.environment(_AnySecret(), "x").values())
    return sorted(set(m.group(2) for m in ROUTE_URL.finditer(text)))


class _AnySecret(dict):
    def __missing__(self, key: str) -> str:
        return "x"


@dataclass
class Server:
    name: str
    workdir: Path
    port: int = field(default_factory=free_port)
    cluster_port: int = field(default_factory=free_port)
    http_port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    def url(self, password: str) -> str:
        return f"nats://services:{password}@127.0.0.1:{self.port}"


def localise(text: str, routes: dict[str, int]) -> str:
    """Route URLs onto loopback: each node's host name replaced by 127.0.0.1 and that node's cluster port."""
    return ROUTE_URL.sub(lambda m: m.group(0).replace(f"{m.group(2)}:6222", f"127.0.0.1:{routes[m.group(2)]}"),
                         text)


def render(text: str, server: Server, certificates: Path, routes: dict[str, int]) -> str:
    text = re.sub(r"^port: 4222$", f"host: 127.0.0.1\nport: {server.port}", text, flags=re.M)
    text = re.sub(r"^http_port: 8222$", f'http: "127.0.0.1:{server.http_port}"', text, flags=re.M)
    text = re.sub(r"^  port: 6222$", f"  host: 127.0.0.1\n  port: {server.cluster_port}", text, flags=re.M)
    text = re.sub(r"store_dir: \S+", f'store_dir: "{server.workdir / "jetstream"}"', text)
    text = text.replace("/etc/nats-route-tls/", f"{certificates}/")
    return localise(text, routes)


def start(server: Server, text: str, env: dict[str, str]) -> Server:
    server.workdir.mkdir(parents=True, exist_ok=True)
    config = server.workdir / "nats.conf"
    config.write_text(text)
    with open(server.workdir / "nats.log", "ab") as log:
        server.process = subprocess.Popen([str(find_nats_server()), "-c", str(config)], env=os.environ | env,
                                          stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=0.5).close()
            return server
        except OSError:
            if server.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{server.name} did not start:\n{_log(server)}") from None
            time.sleep(0.05)


def stop(server: Server) -> None:
    terminate(server.process)


def _log(server: Server) -> str:
    return (server.workdir / "nats.log").read_text()[-3000:]


def make_certificates(directory: Path, *names: str) -> Path:
    subprocess.run(["sh", str(DEPLOY / "nats" / "route-certs.sh"), str(directory), *names], check=True,
                   capture_output=True, timeout=60)
    return directory


@dataclass
class Cluster:
    shape: Shape
    text: str
    secrets: dict[str, str]
    certificates: Path
    routes: dict[str, int]
    nodes: list[Server]

    def password(self) -> str:
        return self.secrets["NATS_SERVICES_PASSWORD"]

    def environment(self, secrets_: dict[str, str], name: str) -> dict[str, str]:
        return {k: localise(v, self.routes) for k, v in self.shape.environment(secrets_, name).items()}


def variables(text: str) -> dict[str, str]:
    """A fresh value (hex, as the docs ask for route passwords) for every secret the deployment reads."""
    names = set(re.findall(r"\$(NATS_\w+)", text)) | {"NATS_ROUTE_PASSWORD", "POSTGRES_PASSWORD"}
    return {name: secrets.token_hex(16) for name in names}


@pytest.fixture(scope="module", params=sorted(SHAPES))
def cluster(request, tmp_path_factory) -> Iterator[Cluster]:
    shape = SHAPES[request.param]
    root = tmp_path_factory.mktemp(f"routes-{request.param}")
    text = shape.config.read_text()
    names = hosts(shape)
    assert len(names) == 3, names
    nodes = [Server(name, root / name) for name in names]
    cluster = Cluster(shape, text, variables(text), make_certificates(root / "route-tls", "127.0.0.1"),
                      {node.name: node.cluster_port for node in nodes}, nodes)
    try:
        for node in nodes:
            start(node, render(text, node, cluster.certificates, cluster.routes),
                  cluster.environment(cluster.secrets, node.name))
        asyncio.run(_until_cluster_formed(cluster))
        yield cluster
    finally:
        for node in nodes:
            stop(node)


async def _until_cluster_formed(cluster: Cluster) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            client = await nats.connect(cluster.nodes[0].url(cluster.password()), connect_timeout=1,
                                        allow_reconnect=False)
        except Exception:  # noqa: BLE001 - not listening yet
            await asyncio.sleep(0.2)
            continue
        try:
            info = await client.jetstream().account_info()
            if info is not None:
                return
        except Exception:  # noqa: BLE001 - no JetStream leader yet: the routes are not up
            await asyncio.sleep(0.2)
        finally:
            await client.close()
    raise AssertionError("the shipped cluster did not form:\n" + "\n".join(_log(n) for n in cluster.nodes))


@dataclass
class Exchange:
    """What crossed between the cluster and a fourth server in both directions."""
    heard_by_fourth: list[bytes]
    heard_by_cluster: list[bytes]


async def _exchange(cluster: Cluster, fourth: Server, fourth_password: str, wait_s: float,
                    until_joined: bool) -> Exchange:
    """The fourth server's client listens on every subject and the cluster's on every subject; each side publishes
    (the cluster a submission event, the fourth a forged score) until wait_s has passed, or, until_joined, until both
    crossed."""
    inside = await nats.connect(cluster.nodes[1].url(cluster.password()), allow_reconnect=False)
    outside = await nats.connect(fourth.url(fourth_password), allow_reconnect=False)
    heard_by_fourth: list[bytes] = []
    heard_by_cluster: list[bytes] = []

    def into(box: list[bytes]):
        async def collect(msg) -> None:
            box.append(msg.data)
        return collect

    try:
        await outside.subscribe(">", cb=into(heard_by_fourth))
        await inside.subscribe(">", cb=into(heard_by_cluster))
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            await inside.publish("evt.submission.received", SECRET)
            await outside.publish("evt.score.computed", FORGED)
            await inside.flush()
            await outside.flush()
            if until_joined and SECRET in heard_by_fourth and FORGED in heard_by_cluster:
                break
            await asyncio.sleep(0.2)
        return Exchange(heard_by_fourth, heard_by_cluster)
    finally:
        await inside.close()
        await outside.close()


def _routes_seen_by(node: Server) -> list[str]:
    import json
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{node.http_port}/routez", timeout=5) as answer:
        return [route.get("remote_name", "") for route in json.load(answer).get("routes", [])]


def _without_credentials(text: str) -> str:
    """The shipped file as an attacker would reuse it: no route login and no TLS."""
    text = re.sub(r"^  authorization \{.*?\}\n", "", text, flags=re.M)
    text = re.sub(r"^  tls \{.*?^  \}\n", "", text, flags=re.S | re.M)
    return text


ROGUES = {
    # the review's exploit: a plain nats-server naming the routes
    "no password, no certificate": lambda cluster, text, env: (_without_credentials(text),
                                                               {k: ROUTE_URL.sub(r"\1\2:6222", v)
                                                                for k, v in env.items()}, cluster.certificates),
    # a certificate of the cluster's CA (a stolen node's), but not the password
    "certificate without the password": lambda cluster, text, env: (text, env, cluster.certificates),
    # the password, but a certificate of a CA of its own making
    "password with a foreign certificate": lambda cluster, text, env: (text, env, None),
}


@pytest.mark.parametrize("rogue", sorted(ROGUES))
def test_a_server_without_the_route_credentials_reads_and_writes_nothing_of_the_cluster(cluster, rogue, tmp_path):
    own = variables(cluster.text)  # the attacker's own accounts' passwords, and a route password of its guessing
    if rogue == "password with a foreign certificate":
        own["NATS_ROUTE_PASSWORD"] = cluster.secrets["NATS_ROUTE_PASSWORD"]
    server = Server("rogue", tmp_path / "rogue")
    text, env, certificates = ROGUES[rogue](cluster, cluster.text, cluster.environment(own, server.name))
    certificates = certificates or make_certificates(tmp_path / "foreign-tls", "127.0.0.1")
    start(server, render(text, server, certificates, cluster.routes), env)
    try:
        crossed = asyncio.run(_exchange(cluster, server, own["NATS_SERVICES_PASSWORD"], ROGUE_WAIT_S,
                                        until_joined=False))
        assert SECRET not in crossed.heard_by_fourth, "a server without the route credentials read the cluster"
        assert FORGED not in crossed.heard_by_cluster, "a server without the route credentials wrote into it"
        assert "rogue" not in _routes_seen_by(cluster.nodes[0]), _routes_seen_by(cluster.nodes[0])
    finally:
        stop(server)


def test_a_server_with_the_route_credentials_joins(cluster, tmp_path):
    server = Server("nats-joiner", tmp_path / "joiner")
    start(server, render(cluster.text, server, cluster.certificates, cluster.routes),
          cluster.environment(cluster.secrets, server.name))
    try:
        began = time.monotonic()
        crossed = asyncio.run(_exchange(cluster, server, cluster.password(), 20, until_joined=True))
        assert SECRET in crossed.heard_by_fourth and FORGED in crossed.heard_by_cluster, _log(server)
        assert time.monotonic() - began < ROGUE_WAIT_S, "joining took longer than a rogue is given"
    finally:
        stop(server)


def test_the_shipped_configuration_does_not_start_without_its_route_certificates(tmp_path):
    """No clear-text fallback: the certificate files are required, not optional."""
    for shape in SHAPES.values():
        text = shape.config.read_text()
        server = Server("nats-1", tmp_path / shape.config.stem)
        config = server.workdir / "nats.conf"
        server.workdir.mkdir(parents=True)
        config.write_text(render(text, server, tmp_path / "no-such-directory", {h: 1 for h in hosts(shape)}))
        env = os.environ | {k: localise(v, {h: 1 for h in hosts(shape)})
                            for k, v in shape.environment(variables(text), "nats-1").items()}
        checked = subprocess.run([str(find_nats_server()), "-t", "-c", str(config)], env=env, capture_output=True,
                                 text=True, timeout=30)
        assert checked.returncode != 0, f"{shape.config.name} starts without route certificates"
        assert "no-such-directory" in checked.stdout + checked.stderr
