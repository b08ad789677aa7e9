"""The shipped NATS configuration (deploy/nats/cluster.conf) as one real nats-server: the cluster block and the fixed
ports and store dropped, its accounts, users and permissions kept exactly; each `$NATS_*` password set in the
server's environment, as compose and Kubernetes do."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from services.kit.embedded import find_nats_server, free_port
from services.kit.embedded.common import _run_sync

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_CONFIG = ROOT / "deploy" / "nats" / "cluster.conf"


def variables(text: str) -> dict[str, str]:
    """A made-up value for each variable the configuration reads from the environment."""
    return {name: f"pw-{name.lower()}" for name in re.findall(r"\$(NATS_\w+)", text)}


def single_node(text: str, port: int, store_dir: Path) -> str:
    text = re.sub(r"^cluster \{.*?^\}\n", "", text, flags=re.S | re.M)
    assert "nats-route:" not in text, "the cluster block was not dropped"
    text = re.sub(r"^port: \d+$", f"port: {port}", text, flags=re.M)
    text = re.sub(r"^http_port: \d+\n", "", text, flags=re.M)
    return re.sub(r"store_dir: \S+", f'store_dir: "{store_dir}"', text)


def runner_users(text: str) -> dict[str, str]:
    """Runner name -> the variable holding its password, for every `runner-<name>` user of the configuration."""
    return dict(re.findall(r"user: runner-([\w-]+), password: \$(\w+)", text))


def agent_consumers(text: str) -> dict[str, list[str]]:
    """Runner name -> the job consumers its permissions let it pull from."""
    found: dict[str, list[str]] = {}
    for block in re.split(r"\n\s*\{\n\s*user: ", text)[1:]:
        name = re.match(r"runner-([\w-]+),", block)
        if name:
            found[name.group(1)] = re.findall(r"\$JS\.API\.CONSUMER\.MSG\.NEXT\.RUNNER_JOBS\.([\w-]+)\"", block)
    return found


@dataclass
class ShippedNats:
    port: int
    passwords: dict[str, str]
    text: str
    process: subprocess.Popen = field(repr=False)

    def url(self, user: str) -> str:
        variable = "NATS_SERVICES_PASSWORD" if user == "services" else runner_users(self.text)[user.removeprefix("runner-")]
        return f"nats://{user}:{self.passwords[variable]}@127.0.0.1:{self.port}"

    def runners(self) -> list[str]:
        return sorted(runner_users(self.text))

    def consumers(self, runner: str) -> list[str]:
        return agent_consumers(self.text).get(runner, [])


def start_shipped_nats(workdir: Path) -> ShippedNats:
    shipped = SHIPPED_CONFIG.read_text()
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "nats.conf"
    config.write_text(single_node(shipped, port, workdir / "jetstream"))
    passwords = variables(shipped)
    env = os.environ | passwords | {"NATS_SERVER_NAME": "kernelbot-test"}
    with open(workdir / "nats.log", "ab") as log:
        process = subprocess.Popen([str(find_nats_server()), "-c", str(config)], env=env, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = ShippedNats(port, passwords, shipped, process)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            _run_sync(lambda: _jetstream_answers(server.url("services")))
            return server
        except Exception as exc:  # noqa: BLE001 - anything short of a ready server means "not yet"
            if process.poll() is not None or time.monotonic() > deadline:
                stop(server)
                log = (workdir / "nats.log").read_text()[-3000:]
                raise RuntimeError(f"nats-server did not start: {exc!r}\n{log}") from exc
            time.sleep(0.05)


async def _jetstream_answers(url: str) -> None:
    import nats

    client = await nats.connect(url, connect_timeout=1, allow_reconnect=False)
    try:
        await client.jetstream().account_info()
    finally:
        await client.close()


def stop(server: ShippedNats) -> None:
    terminate(server.process)


def terminate(process: subprocess.Popen | None) -> None:
    """Stop a server process: SIGTERM, then SIGKILL if it has not gone within ten seconds."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
