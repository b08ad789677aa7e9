"""Facts of OAuth registration (docs/http-api.md "Registration")."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from schemas.credentials import read_clear_id
from schemas.envelope import Event

Provider = Literal["discord", "github"]


class OAuthUserRegistered(Event):
    """A provider account proved its identity and is now bound to a new CLI id.

    `user_id` is the provider's bare account id (the public id popcorn-cli shows); `provider` keeps identities of
    different providers apart. With `is_reset` the account already existed and the new id replaces its old one.
    The CLI id travels only as `cli_id_sha256`; events recorded before that carry `cli_id` in clear and are read as if
    they had carried its digest (schemas/credentials.py).
    """

    subject = "evt.user.oauth_registered"
    user_id: str
    user_name: str
    cli_id_sha256: str
    provider: Provider
    is_reset: bool = False

    @model_validator(mode="before")
    @classmethod
    def _hash_clear_id(cls, data: object) -> object:
        return read_clear_id(data)

    def identity(self) -> str:
        return f"{self.provider}:{self.user_id}:{self.cli_id_sha256}"


class WebAuthIdSet(Event):
    """A user's web id (the `X-Web-Auth-Id` a website such as kernelboard submits with) was set, as its digest.

    A user not known yet is created without a CLI id; a known one keeps their name and CLI id. Set by the admin
    route a website calls when someone signs in (docs/http-api.md "Extensions"), or by `kernelbot import-upstream`. A
    clear `web_auth_id` is read as its digest (schemas/credentials.py).
    """

    subject = "evt.user.web_auth_id_set"
    user_id: str
    user_name: str
    web_auth_id_sha256: str

    @model_validator(mode="before")
    @classmethod
    def _hash_clear_id(cls, data: object) -> object:
        return read_clear_id(data)

    def identity(self) -> str:
        return f"{self.user_id}:{self.web_auth_id_sha256}"


class WebsiteUserSignedIn(Event):
    """A website that signs people in itself vouched for a user the platform did not know yet.

    Kernelboard (gpumode.com) writes a web id into `leaderboard.user_info` when someone signs in there, as it does on
    upstream's database; the first time such a user submits through it, the gateway records them with this event. They
    are created without any credential of the platform's (their web id stays the website's, accepted on the submit
    route only), so that bans and renames reach them like anyone else. A known user is left as they are.
    """

    subject = "evt.user.website_signed_in"
    user_id: str
    user_name: str

    def identity(self) -> str:
        return self.user_id
