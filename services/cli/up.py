"""`kernelbot up`: the whole platform on one machine, with its own NATS and Postgres unless told otherwise."""

from __future__ import annotations

import asyncio
import getpass
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nats

from problems import PROBLEMS_ROOT
from schemas.credentials import cli_id_hash
from schemas.events import CliUserRegistered
from schemas.streams import EVENTS
from services.cli import repository
from services.cli.bundled import leaderboards_from_competition
from services.kit.bus import publish_all
from services.kit.db import apply_migrations

SERVICES = ("ledger", "dispatcher", "scorer", "gateway")
LOCAL_USER_ID = "local"


@dataclass
class Stack:
    data_dir: Path
    port: int
    development: bool = False  # KB_DEVELOPMENT_MODE for the services: runs that were not fully isolated rank
    nats_url: str = ""
    database_url: str = ""
    servers: list = field(default_factory=list)
    children: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start_infrastructure(self) -> None:
        from services.kit.embedded import start_nats, start_postgres
        from services.kit.upstream_env import env_value

        self.nats_url = os.environ.get("KB_NATS_URL", "")
        self.database_url = env_value("database_url") or ""  # DATABASE_URL, upstream's name, counts too
        if not self.nats_url:
            nats_server = start_nats(self.data_dir / "nats", port=int(os.environ.get("KB_NATS_PORT", "0")) or None)
            self.servers.append(nats_server)
            self.nats_url = nats_server.url
        if not self.database_url:
            postgres = start_postgres(self.data_dir / "postgres")
            self.servers.append(postgres)
            self.database_url = postgres.url
        apply_migrations(self.database_url, wait_s=0)  # a person waits at the terminal: say it, don't hang

    def service_env(self) -> dict[str, str]:
        from services.kit.upstream_env import ALIASES, FIRST_OF

        # the services get the database and the port by our names only: upstream's beside them would be a clash they
        # refuse
        theirs = {ALIASES["database_url"], *(name for name, _ in FIRST_OF["port"])}
        env = {k: v for k, v in os.environ.items() if k.upper() not in theirs}
        env.update(KB_NATS_URL=self.nats_url, KB_DATABASE_URL=self.database_url, KB_PORT=str(self.port),
                   KB_RUNS_DIR=str(self.data_dir / "runs"), KB_WORKER_ID=f"up-{self.data_dir.name}")
        if self.development:
            env["KB_DEVELOPMENT_MODE"] = "true"
        return env

    def spawn(self, name: str) -> None:
        log = open(self.data_dir / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child for its life
        self.children[name] = subprocess.Popen(
            [sys.executable, "-m", "services.cli", "serve", name], env=self.service_env(), stdout=log,
            stderr=subprocess.STDOUT,
        )

    def supervise_once(self) -> list[str]:
        """Restart any service that died; returns the names restarted."""
        restarted = []
        for name, child in list(self.children.items()):
            if child.poll() is not None:
                self.spawn(name)
                restarted.append(name)
        return restarted

    def stop(self) -> None:
        for child in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for child in self.children.values():
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
        for server in reversed(self.servers):
            server.stop()


async def seed(stack: Stack) -> str:
    """Bundled leaderboards and the local user, published as events the first time; returns the local CLI id."""
    cli_file = stack.data_dir / "cli_id"
    if not cli_file.exists():
        cli_file.write_text(secrets.token_urlsafe(24))
        cli_file.chmod(0o600)
    cli_id = cli_file.read_text().strip()
    existing, has_user = await repository.seeded(stack.database_url, cli_id)
    events = leaderboards_from_competition(PROBLEMS_ROOT / "examples.yaml", existing)
    if not has_user:
        events.append(CliUserRegistered(user_id=LOCAL_USER_ID, user_name=getpass.getuser(),
                                        cli_id_sha256=cli_id_hash(cli_id)))
    await publish_all(stack.nats_url, events)
    return cli_id


def _stop_on_signals() -> None:
    """Ctrl-C, a terminal hang-up and a polite kill all end in the same clean shutdown.

    SIGINT is installed explicitly: a process started in the background by a shell inherits it ignored.
    """
    def interrupt(*_):
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)


def isolation_line(level: str, reason: str, development: bool) -> str | None:
    """What `kernelbot up` says at start about the isolation its local runner gives, when it is not full."""
    if level == "full":
        return None
    if development:
        return (f"Runs are confined by resource limits only: {reason}; development mode (--dev): they are ranked, "
                f"and their reports say so")
    return f"Runs are confined by resource limits only: {reason}; they will not be ranked unless --dev"


def run_up(data_dir: Path, port: int, echo, development: bool = False) -> None:
    from runner.confinement.sandbox import sandbox_level
    from services.scorer.settings import ScorerSettings

    data_dir.mkdir(parents=True, exist_ok=True)
    _stop_on_signals()
    # KB_DEVELOPMENT_MODE in the environment counts as --dev: the services read it as well
    development = development or ScorerSettings().development_mode
    stack = Stack(data_dir=data_dir, port=port, development=development)
    try:
        line = isolation_line(*sandbox_level(), development)
        if line:
            echo(line)
        echo(f"Starting NATS and Postgres under {data_dir} ...")
        stack.start_infrastructure()
        for name in SERVICES:
            stack.spawn(name)
        from services.discord.app import enabled as discord_enabled

        if discord_enabled():
            stack.spawn("discord")
        else:
            echo("Discord bot: off (set KB_DISCORD_TOKEN and KB_DISCORD_GUILD_ID to start it; see docs/discord.md)")
        asyncio.run(_seed_when_streams_exist(stack))
        echo(f"KernelBot is up: http://127.0.0.1:{port}  (logs in {data_dir})")
        echo(f"Your CLI id is stored in {data_dir / 'cli_id'}; try:")
        echo("  kernelbot submit problems/examples/vectoradd_py/submission.py --leaderboard vectoradd_py --gpu cpu "
             "--mode leaderboard")
        echo("Press Ctrl-C to stop.")
        while True:
            time.sleep(1)
            for name in stack.supervise_once():
                echo(f"{name} exited; restarted it (see {data_dir / (name + '.log')})")
    except KeyboardInterrupt:
        echo("Stopping ...")
    finally:
        stack.stop()


async def _seed_when_streams_exist(stack: Stack) -> str:
    """The services declare the streams at start-up; wait for them before publishing the seed events."""
    client = await nats.connect(stack.nats_url)
    try:
        js = client.jetstream()
        for _ in range(300):
            try:
                await js.stream_info(EVENTS.name)
                break
            except Exception:  # noqa: BLE001 - not declared yet
                await asyncio.sleep(0.1)
    finally:
        await client.close()
    return await seed(stack)
