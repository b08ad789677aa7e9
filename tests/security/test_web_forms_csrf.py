"""The web pages' forms carry a token another site cannot know.

A page elsewhere can make a visitor's browser post to `/web/login` (signing them in to an account of the page's
choosing: whatever they then submit on the site lands in that account) or to `/web/logout`. The gateway answers
such a post with 403 unless it carries the token of a form this site served to that same browser.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.oauth_platform import OAuthPlatform, hidden_fields, oauth_platform

EVIL = {"Origin": "https://evil.example", "Referer": "https://evil.example/win-a-gpu.html"}


@pytest.fixture(scope="module")
def platform(postgres_server_url, _external_nats_url, tmp_path_factory) -> Iterator[OAuthPlatform]:
    with oauth_platform(postgres_server_url, _external_nats_url, Path(tmp_path_factory.mktemp("csrf"))) as running:
        yield running


@pytest.fixture(scope="module")
def attackers_cli(platform) -> str:
    return platform.register("csrf-attacker", "attacker")


def browser(platform: OAuthPlatform) -> httpx.Client:
    return httpx.Client(base_url=platform.url, timeout=30)


def test_a_cross_site_sign_in_is_refused(platform, attackers_cli):
    with browser(platform) as victim:
        forged = victim.post("/web/login", data={"cli_id": attackers_cli, "next": "/web/submissions"}, headers=EVIL)
        assert forged.status_code == 403
        assert "kb_session" not in forged.headers.get("set-cookie", "")
        assert victim.get("/web/submissions").status_code == 303  # not signed in


def test_another_browsers_token_is_refused(platform, attackers_cli):
    # the attacker fetches a real form (his own cookie, his own token) and replays the token from the victim's browser
    with browser(platform) as attacker:
        token = hidden_fields(attacker.get("/web/login").text)["csrf_token"]
    with browser(platform) as victim:
        victim.get("/web")  # the victim has been here before: a cookie of their own
        forged = victim.post("/web/login", data={"cli_id": attackers_cli, "csrf_token": token}, headers=EVIL)
        assert forged.status_code == 403
        assert victim.get("/web/submissions").status_code == 303


def test_the_sites_own_forms_work(platform, attackers_cli):
    with browser(platform) as person:
        fields = hidden_fields(person.get("/web/login?next=/web/submissions").text)
        signed_in = person.post("/web/login", data={**fields, "cli_id": attackers_cli})
        assert signed_in.status_code == 303 and signed_in.headers["location"] == "/web/submissions"
        mine = person.get("/web/submissions")
        assert mine.status_code == 200 and 'id="viewer">attacker<' in mine.text

        # sign out: refused from another site, done from the page's own form
        assert person.post("/web/logout", headers=EVIL).status_code == 403
        assert person.get("/web/submissions").status_code == 200
        out = person.post("/web/logout", data={"csrf_token": hidden_fields(mine.text)["csrf_token"]})
        assert out.status_code == 303
        assert person.get("/web/submissions").status_code == 303
