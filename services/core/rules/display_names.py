"""The name the platform shows for a person: their display name, not their account handle, whichever front end
they came through (a Discord command, popcorn-cli's Discord or GitHub registration). Rankings, reports and exports
show what is chosen here. Pure."""

from __future__ import annotations

from collections.abc import Mapping

MAX_LENGTH = 100
# Per provider, the profile fields to take, first one set wins: the display name, then the handle.
FIELDS: dict[str, tuple[str, ...]] = {
    "discord": ("global_name", "username"),
    "github": ("name", "login"),
}


def usable(value: object) -> str | None:
    if not isinstance(value, str) or "\x00" in value:
        return None
    value = " ".join(value.split())
    return value[:MAX_LENGTH] or None


def display_name(provider: str, profile: Mapping[str, object]) -> str | None:
    """The display name of an account's profile, or its handle when it has none; None when neither is usable."""
    for field in FIELDS[provider]:
        name = usable(profile.get(field))
        if name is not None:
            return name
    return None
