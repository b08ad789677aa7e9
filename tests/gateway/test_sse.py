"""The streaming submit route byte for byte, read the way popcorn-cli reads it
(docs/http-api.md "The streaming submit")."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.gateway.conftest import CODE, cli, new_user
from tests.support.platform import Platform


@pytest.fixture(scope="module")
def gateway(gateway_processes: Platform) -> Platform:
    """Every service a subprocess here: these tests need the gateway on a port (tests/gateway/conftest.py)."""
    return gateway_processes



def parse_frames(raw: bytes) -> list[tuple[str, dict]]:
    """popcorn-cli's parser: split on the two bytes "\\n\\n"; per message one `event:` and one `data:` line."""
    messages = raw.decode("ascii").split("\n\n")
    assert messages[-1] == "", "the stream must end with a complete frame"
    frames = []
    for message in messages[:-1]:
        lines = message.split("\n")
        assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), message
        frames.append((lines[0].removeprefix("event: "), json.loads(lines[1].removeprefix("data: "))))
    return frames


def stream(platform, cli_id: str, path: str, file_name: str = "k.py") -> httpx.Response:
    response = platform.http.post(path, headers=cli(cli_id), files={"file": (file_name, CODE.encode())},
                                  timeout=60)
    return response


def test_a_streamed_test_submission_ends_with_one_result(gateway):
    _, cli_id = new_user(gateway)

    response = stream(gateway, cli_id, "/open/null/TEST")

    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    assert "content-encoding" not in response.headers
    frames = parse_frames(response.content)
    names = [name for name, _ in frames]
    assert names[0] == "status" and names[-1] == "result" and set(names[:-1]) == {"status"}
    first, (_, result) = frames[0][1], frames[-1]
    submission_id = first["submission_id"]
    doing = "queued" if first["job_status"] in ("initial", "pending") else first["job_status"]  # the null GPU is fast
    assert first == {"status": "processing", "elapsed_time": 0.0, "submission_id": submission_id,
                     "job_status": first["job_status"],
                     "message": f"Submission {submission_id} {doing} on null (0s elapsed)"}
    assert result["status"] == "success" and result["job_status"] == "succeeded"
    assert result["submission_id"] == submission_id
    [full] = result["results"]
    assert set(full) == {"success", "error", "system", "runs"} and full["success"] is True
    assert set(full["system"]) >= {"gpu", "device_count", "cpu", "runtime", "platform", "torch", "hostname"}
    assert list(full["runs"]) == ["test"]
    assert set(full["runs"]["test"]) == {"start", "end", "compilation", "run", "profile"}
    assert full["runs"]["test"]["run"]["result"]["check"] == "pass"
    [report] = result["reports"]  # status lines, then the long report (docs/quickstart.md)
    assert report.startswith("**null on null ✅ success**\n> ✅ Testing successful\n\nRunning on:\n* GPU: `")
    assert "## ✅ Passed " in report
    # the streamed submission is the same durable object the polling client reads
    assert gateway.submission(cli_id, submission_id)["job"]["status"] == "succeeded"


def test_a_ranked_stream_shows_the_secret_run_redacted(gateway):
    _, cli_id = new_user(gateway)

    _, result = parse_frames(stream(gateway, cli_id, "/OPEN/null/leaderboard").content)[-1]

    public, secret = result["results"]
    assert list(public["runs"]) == list(secret["runs"]) == ["test", "benchmark", "leaderboard"]
    assert public["runs"]["leaderboard"]["run"]["result"]["benchmark.0.mean"] == "1000.0"
    for stage in secret["runs"].values():
        run = stage["run"]
        assert (run["stdout"], run["stderr"], run["command"], run["result"]) == ("", "", "", {})
        assert run["success"] is True and run["passed"] is True and isinstance(run["duration"], float)
    lines = "\n> ✅ Testing successful\n> ✅ Benchmarking successful\n> ✅ Leaderboard run successful"
    public_report, secret_report = result["reports"]
    assert public_report.startswith("**null on null ✅ success**" + lines + "\n\nRunning on:")
    assert "## Ranked Benchmark:" in public_report
    assert secret_report == "**null on null (secret) ✅ success**" + lines  # status lines only, nothing more


@pytest.mark.parametrize(("headers", "path", "status", "detail"), [
    ({}, "/open/null/test", 400, "Missing X-Popcorn-Cli-Id header"),
    ({"X-Web-Auth-Id": "web"}, "/open/null/test", 400, "Missing X-Popcorn-Cli-Id header"),
    ({"X-Popcorn-Cli-Id": "unknown"}, "/open/null/test", 401, "Invalid or unauthorized X-Popcorn-Cli-Id"),
    (None, "/nope/null/test", 404, "Leaderboard `nope` does not exist."),
    (None, "/open/null/private", 400, "Submission mode 'private' is not supported for this endpoint"),
    (None, "/open/H100/test", 400, "GPU type 'H100' is not supported for leaderboard 'open'. Supported GPUs: null"),
    (None, "/closed/null/test", 403, "You do not have access to this leaderboard"),
])
def test_every_check_fails_before_the_stream_as_plain_http(gateway, headers, path, status, detail):
    if headers is None:
        headers = cli(new_user(gateway)[1])
    response = gateway.http.post(path, headers=headers, files={"file": ("k.py", CODE.encode())})
    assert (response.status_code, response.json()) == (status, {"detail": detail})
    assert response.headers["content-type"] == "application/json"


def test_deleting_a_streamed_submission_ends_its_stream_with_the_cancellation(gateway):
    _, cli_id = new_user(gateway)
    with gateway.http.stream("POST", "/idle/idle/test", headers=cli(cli_id),
                             files={"file": ("k.py", CODE.encode())}) as response:
        chunks = response.iter_bytes()
        first = next(chunks)
        [(name, status)] = parse_frames(first)
        assert name == "status" and status["job_status"] in ("initial", "pending")
        deleted = gateway.http.delete(f"/user/submissions/{status['submission_id']}", headers=cli(cli_id))
        assert deleted.status_code == 200
        rest = b"".join(chunks)

    assert parse_frames(rest) == [("error", {"status": "error", "detail": "Submission cancelled", "status_code": 409,
                                             "submission_id": status["submission_id"]})]


def test_a_client_that_goes_away_does_not_cancel_the_job(gateway):
    _, cli_id = new_user(gateway)
    with httpx.Client(base_url=gateway.url, timeout=30) as client, client.stream(
            "POST", "/open/null/benchmark", headers=cli(cli_id), files={"file": ("k.py", CODE.encode())}) as response:
        first = parse_frames(next(response.iter_bytes()))[0][1]
    # the connection is closed after the first frame

    view = gateway.wait_done(cli_id, first["submission_id"])
    assert view["job"]["status"] == "succeeded"
    assert [run["mode"] for run in view["runs"]] == ["benchmark"]
