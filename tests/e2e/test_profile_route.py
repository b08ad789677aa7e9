"""`popcorn submit --profile` against the platform as `kernelbot up` runs it: CPU runner, torch.profiler."""

from __future__ import annotations

import base64
import csv
import io
import json
import zipfile

import httpx
import pytest

from problems import PROBLEMS_ROOT
from services.core.rules import artifact_links
from tests.support.in_process import InProcessPlatform
from tests.support.oauth_platform import hidden_fields
from tests.support.platform import ADMIN_TOKEN
from tests.support.popcorn_profile import extract, profile_request, read_stream

pytestmark = pytest.mark.slow

VECTORADD = PROBLEMS_ROOT / "examples" / "vectoradd_py"
SESSION_SECRET = "profile-link-test-secret"
TORCH_FILES = ("torch-details.txt", "torch-details.csv", "manifest.json")


@pytest.fixture
def platform(nats_url: str, database_url: str, tmp_path):
    running = InProcessPlatform(nats_url, database_url, tmp_path, extra_env={"KB_SESSION_SECRET": SESSION_SECRET})
    running.start()
    running.load_bundled_problems()
    yield running
    running.stop()


def profile(platform, cli_id: str, code: bytes, **options):
    headers, body = profile_request(cli_id, "submission.py", code, **options)
    with platform.http.stream("POST", "/profile/vectoradd_py/cpu", headers=headers, content=body,
                              timeout=180) as response:
        if response.status_code != 200:
            response.read()
            return response, None
        return response, read_stream(response)


def test_profile_of_one_case_streams_its_artifacts_and_only_the_submitter_or_an_admin_downloads_them(platform):
    alice, bob = platform.register("2001", "alice"), platform.register("2002", "bob")
    response, answer = profile(platform, alice, (VECTORADD / "submission.py").read_bytes(), benchmark_index=1)

    assert response.status_code == 200, response.text
    statuses, event, data = answer
    assert event == "result", data
    assert statuses and statuses[0].startswith(f"Submission {data['submission_id']} ")
    (run,) = data["results"]
    assert list(run["runs"]) == ["profile.1"]  # the chosen case alone
    stage = run["runs"]["profile.1"]
    assert stage["profile"]["profiler"] == "torch.profiler"
    report = base64.b64decode(stage["run"]["result"]["benchmark.0.report"].replace("*", "/")).decode()
    assert "custom_kernel" in report
    (artifact,) = data["artifacts"]
    assert artifact["name"] == "profile.1-seed-8818-size-96.zip" and artifact["inline"] is True
    assert stage["profile"]["download_url"] == artifact["url"]

    inline = base64.b64decode(stage["profile"]["trace"])
    downloaded = platform.http.get(artifact["url"], headers={"X-Popcorn-Cli-Id": alice})
    assert downloaded.status_code == 200 and downloaded.content == inline
    assert downloaded.headers["content-type"] == "application/zip"
    files = extract(downloaded.content, TORCH_FILES)
    assert set(files) == set(TORCH_FILES)
    manifest = json.loads(files["manifest.json"])
    assert manifest["benchmark"]["index"] == 1 and manifest["benchmark"]["case"] == {"size": 96, "seed": 8818}
    assert manifest["benchmark"]["spec"] in ("size: 96; seed: 8818", "seed: 8818; size: 96")
    assert manifest["capture"]["tool"] == "torch.profiler" and manifest["fingerprint"].startswith("sha256:")
    header = next(csv.reader(io.StringIO(files["torch-details.csv"].decode())))
    assert header[0] == "Name"

    assert platform.http.get(artifact["url"], headers={"X-Popcorn-Cli-Id": bob}).status_code == 403
    assert platform.http.get(artifact["url"]).status_code == 401
    admin = platform.http.get(artifact["url"], headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert admin.status_code == 200 and admin.content == inline
    # the submitter's signed-in browser (the web session cookie), as a Discord link is opened
    form = hidden_fields(platform.http.get("/web/login").text)
    signed_in = platform.http.post("/web/login", data={**form, "cli_id": alice}, follow_redirects=False)
    assert signed_in.status_code == 303, signed_in.text
    browser = httpx.Client(cookies={"kb_session": signed_in.cookies["kb_session"]})
    platform.http.cookies.clear()
    assert browser.get(artifact["url"]).content == inline
    tampered = artifact["url"].replace("profile.1?", "profile.0?")
    assert platform.http.get(tampered, headers={"X-Popcorn-Cli-Id": alice}).status_code == 403
    expired = artifact_links.link(platform.url, SESSION_SECRET.encode(), data["submission_id"], "cpu", "profile.1",
                                  ttl_s=-1)
    assert platform.http.get(expired, headers={"X-Popcorn-Cli-Id": alice}).status_code == 410


def test_a_benchmark_index_out_of_range_is_refused_before_the_stream(platform):
    alice = platform.register("2003", "alice")
    response, _ = profile(platform, alice, (VECTORADD / "submission.py").read_bytes(), benchmark_index=3)
    assert response.status_code == 400
    assert response.json()["detail"].startswith("benchmark_index 3 is out of range: leaderboard 'vectoradd_py' "
                                                "has 3 benchmark cases")
    bad, _ = profile(platform, alice, (VECTORADD / "submission.py").read_bytes(), launch_count=0)
    assert bad.status_code == 400 and "launch_count" in bad.json()["detail"]


def test_a_kernel_filter_matching_nothing_is_an_error_event(platform):
    alice = platform.register("2004", "alice")
    response, answer = profile(platform, alice, (VECTORADD / "submission.py").read_bytes(), benchmark_index=0,
                               kernel_name="no_such_kernel")
    assert response.status_code == 200
    _, event, data = answer
    assert event == "error"
    assert "torch.profiler recorded no operation matching 'no_such_kernel'" in data["detail"]
    assert data["status_code"] == 400


def test_every_case_is_profiled_without_an_index(platform):
    alice = platform.register("2005", "alice")
    _, (_, event, data) = profile(platform, alice, (VECTORADD / "submission.py").read_bytes())
    assert event == "result", data
    assert list(data["results"][0]["runs"]) == ["profile.0", "profile.1", "profile.2"]
    names = [artifact["name"] for artifact in data["artifacts"]]
    assert names == ["profile.0-seed-6252-size-64.zip", "profile.1-seed-8818-size-96.zip",
                     "profile.2-seed-3141-size-128.zip"]
    for artifact in data["artifacts"]:
        with zipfile.ZipFile(io.BytesIO(platform.http.get(
                artifact["url"], headers={"X-Popcorn-Cli-Id": alice}).content)) as archive:
            assert archive.namelist()[0].startswith(artifact["name"].removesuffix(".zip") + "/")
