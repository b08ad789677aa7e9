"""Facts of OAuth registration (http-api.md §3.3, §8.1)."""

from __future__ import annotations

from typing import Literal

from schemas.envelope import Event

Provider = Literal["discord", "github"]


class OAuthUserRegistered(Event):
    """A provider account proved its identity and is now bound to `cli_id`.

    `user_id` is the provider's bare account id (the public id popcorn-cli shows); `provider` keeps identities of
    different providers apart. With `is_reset` the account already existed and `cli_id` replaces its old one.
    """

    subject = "evt.user.oauth_registered"
    user_id: str
    user_name: str
    cli_id: str
    provider: Provider
    is_reset: bool = False

    def identity(self) -> str:
        return f"{self.provider}:{self.user_id}:{self.cli_id}"
