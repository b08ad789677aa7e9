"""A profile's thread on Discord links the artifacts popcorn-cli downloads: the same signed gateway links."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from pydantic import SecretStr

from services.core.rules import artifact_links
from services.discord import reporting
from services.discord.bot import profile_links
from services.discord.settings import DiscordSettings

SECRET = "shared-with-the-gateway"


def profiled(*stages: str) -> dict:
    run = {"success": True, "passed": True, "command": "", "stdout": "", "stderr": "", "exit_code": 0,
           "duration": 1.0, "result": {"benchmark-count": "1", "benchmark.0.spec": "n: 1", "check": "pass"}}
    return {"success": True, "error": "", "system": {"gpu": "B200"},
            "runs": {stage: {"run": run, "profile": {"profiler": "Nsight Compute", "trace": "UEsFBgAAAAAAAAAAAAAAAAAAAAAAAA=="}}
                     for stage in stages}}


def test_the_thread_ends_with_a_gateway_link_per_profiled_case():
    settings = DiscordSettings(public_url="https://kb.example", session_secret=SecretStr(SECRET))
    link = profile_links(settings)
    assert link is not None
    messages, _ = reporting.thread_messages("B200", "modal", "profile", profiled("profile.0", "profile.2"),
                                            lambda gpu, stage: link(41, gpu, stage))
    text = "".join(messages)
    assert "**Profile artifacts** (for you and the admins; the links expire):" in text
    urls = [line.split("<", 1)[1].rstrip(">") for line in text.splitlines() if line.startswith("* `profile.")]
    assert [urlparse(url).path for url in urls] == ["/profile/artifacts/41/B200/profile.0",
                                                    "/profile/artifacts/41/B200/profile.2"]
    query = parse_qs(urlparse(urls[0]).query)
    # the gateway, holding the same KB_SESSION_SECRET, accepts the bot's link
    assert artifact_links.authentic(SECRET.encode(), 41, "B200", "profile.0", int(query["expires"][0]),
                                    query["signature"][0])


def test_no_links_without_the_gateway_s_address_and_secret_or_for_other_modes():
    assert profile_links(DiscordSettings(public_url="https://kb.example")) is None
    messages, _ = reporting.thread_messages("B200", "modal", "profile", profiled("profile.0"), None)
    assert "Profile artifacts" not in "".join(messages)
    test_run = {"success": True, "error": "", "system": {}, "runs": {}}
    messages, _ = reporting.thread_messages("B200", "modal", "test", test_run, lambda gpu, stage: "x")
    assert "Profile artifacts" not in "".join(messages)
