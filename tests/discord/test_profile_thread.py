"""`/leaderboard submit profile` through the bot and the real platform: the run's thread links each case's artifact
with the gateway's signed link, which the submitter (on popcorn-cli too) and an admin can use."""

from __future__ import annotations

import re

import pytest

from problems import PROBLEMS_ROOT
from tests.discord.conftest import SESSION_SECRET
from tests.discord.wire import Person, eventually, option, start_bot
from tests.support.platform import ADMIN_TOKEN

pytestmark = pytest.mark.slow

VECTORADD = PROBLEMS_ROOT / "examples" / "vectoradd_py" / "submission.py"
LINK = re.compile(r"\* `(profile\.\d+)`: <([^>]+)>")


async def test_a_profile_thread_links_the_artifacts_the_gateway_serves(fake_discord, platform):
    wire = await start_bot(fake_discord, platform.nats_url, platform.database_url, public_url=platform.url,
                           session_secret=SESSION_SECRET)
    try:
        person = Person(8101, "heidi")
        cli_id = platform.register(str(person.user_id), person.name)
        attachment = fake_discord.add_attachment(
            "add.py", b"#!POPCORN leaderboard vectoradd_py\n#!POPCORN gpu cpu\n" + VECTORADD.read_bytes())
        token = wire.interact(person, "leaderboard", [{"name": "submit", "type": 2, "options": [
            {"name": "profile", "type": 1, "options": [option("script", attachment["id"], 11)]}]}],
            attachments=[attachment])
        queued = await wire.answer(token, "**Submission ")
        submission_id = int(queued.split("**Submission ")[1].split("**")[0])
        channel = int(wire.layout.submissions_channel)

        def links() -> list[tuple[str, str]]:
            threads = [t for t in fake_discord.threads_of(channel)
                       if t["name"].startswith(f"Submission {submission_id}:")]
            text = "".join(m["content"] for t in threads for m in fake_discord.messages_in(int(t["id"])))
            return LINK.findall(text)

        await eventually(lambda: len(links()) == 3, 120, lambda: "the artifact links in the thread")
    finally:
        await wire.client.close()
    stages = [stage for stage, _ in links()]
    assert stages == ["profile.0", "profile.1", "profile.2"]
    for stage, url in links():
        assert url.startswith(f"{platform.url}/profile/artifacts/{submission_id}/cpu/{stage}?")
        mine = platform.http.get(url, headers={"X-Popcorn-Cli-Id": cli_id})
        assert mine.status_code == 200 and mine.headers["content-type"] == "application/zip"
        admin = platform.http.get(url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert admin.content == mine.content
    stranger = platform.register("8102", "ivan")
    assert platform.http.get(links()[0][1], headers={"X-Popcorn-Cli-Id": stranger}).status_code == 403
