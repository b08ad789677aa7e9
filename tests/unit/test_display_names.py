"""The name shown for a person is their display name, else their handle, whichever provider they came through."""

from __future__ import annotations

import pytest

from services.core.rules.display_names import display_name


@pytest.mark.parametrize(("provider", "profile", "shown"), [
    ("discord", {"username": "ada_l", "global_name": "Ada Lovelace"}, "Ada Lovelace"),
    ("discord", {"username": "ada_l", "global_name": None}, "ada_l"),
    ("discord", {"username": "ada_l", "global_name": "   "}, "ada_l"),
    ("github", {"login": "octocat", "name": "The  Octocat"}, "The Octocat"),
    ("github", {"login": "octocat", "name": None}, "octocat"),
    ("github", {"login": "octo\x00cat"}, None),
    ("github", {}, None),
])
def test_the_display_name_comes_before_the_handle(provider, profile, shown):
    assert display_name(provider, profile) == shown


def test_a_long_name_is_cut():
    assert len(display_name("github", {"name": "x" * 500, "login": "x"})) == 100
