"""A gateway and a ledger on their own NATS and Postgres, with OAuth pointed at the local fake provider, and HTTP
clients bound to chosen loopback addresses: two people at two addresses, for the registration attacks."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

from services.gateway.accounts import registration
from services.kit.embedded import create_database, drop_database, start_nats
from tests.support.events import delete_all_streams
from tests.support.fake_oauth import FakeOAuth, FakeOAuthServer
from tests.support.platform import Platform


class OAuthPlatform(Platform):
    def __init__(self, nats_url: str, database_url: str, workdir: Path, fake: FakeOAuth,
                 extra_env: dict[str, str] | None = None) -> None:
        super().__init__(nats_url, database_url, workdir, extra_env=extra_env)
        self.fake = fake

    def env(self) -> dict[str, str]:
        env = super().env()
        env.update(KB_OAUTH_DISCORD=json.dumps(self.fake.settings("discord")),
                   KB_OAUTH_GITHUB=json.dumps(self.fake.settings("github")), KB_PUBLIC_URL=self.url)
        return env

    def client(self, address: str) -> httpx.Client:
        """A browser or a popcorn-cli whose connections come from `address` (any of 127.0.0.0/8 here)."""
        return httpx.Client(base_url=self.url, transport=httpx.HTTPTransport(local_address=address),
                            follow_redirects=True, timeout=30)

    def init(self, client: httpx.Client, provider: str = "github", headers: dict | None = None) -> str:
        """popcorn-cli's `GET /auth/init`: the new CLI id."""
        response = client.get("/auth/init", params={"provider": provider}, headers=headers)
        assert response.status_code == 200, response.text
        return response.json()["state"]

    def authorize_link(self, cli_id: str, is_reset: bool, provider: str = "github") -> str:
        """The provider's page popcorn-cli opens (or an attacker mails), with the state as popcorn-cli encodes it."""
        return self.fake.authorize_url(provider, f"{self.url}/auth/cli/{provider}",
                                       registration.encode_state(cli_id, is_reset))

    def works(self, cli_id: str) -> bool:
        return self.http.get("/user/submissions", headers={"X-Popcorn-Cli-Id": cli_id}).status_code == 200


def hidden_fields(html: str) -> dict[str, str]:
    """The hidden inputs of a page's forms, as the browser would post them."""
    return dict(re.findall(r'<input type="hidden" name="([a-z_]+)" value="([^"]*)">', html))


@contextmanager
def oauth_platform(postgres_server_url: str, external_nats_url: str | None, workdir: Path,
                   extra_env: dict[str, str] | None = None) -> Iterator[OAuthPlatform]:
    with ExitStack() as stack:
        if external_nats_url is not None:
            asyncio.run(delete_all_streams(external_nats_url))
            nats_url = external_nats_url
        else:
            nats_url = stack.enter_context(start_nats(workdir / "nats")).url
        name = f"kb_oauth_{uuid.uuid4().hex[:12]}"
        database_url = create_database(postgres_server_url, name)
        stack.callback(drop_database, postgres_server_url, name)
        fake = stack.enter_context(FakeOAuthServer())
        platform = OAuthPlatform(nats_url, database_url, workdir, fake, extra_env)
        stack.callback(platform.stop)
        platform.start("ledger", "gateway")
        yield platform
