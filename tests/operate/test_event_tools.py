"""`kernelbot events tail|export|import` and `kernelbot dlq`, against the running platform."""

from __future__ import annotations

import json

from problems import PROBLEMS_ROOT
from services.kit.embedded import start_nats
from tests.operate.conftest import run_cli
from tests.support.events import dead_letters, publish_raw
from tests.support.in_process import InProcessPlatform
from tests.support.platform import identity_board

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()


def records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_log_is_tailed_exported_and_imported_once_and_dead_letters_are_explained(
        nats_url, database_url, tmp_path):
    platform = InProcessPlatform(nats_url, database_url, tmp_path, null_gpus=("null",))
    platform.start()
    try:
        platform.add_boards(identity_board("tools", ["null"]))
        cli = platform.register("81", "erin")
        response = platform.submit(cli, "tools", "null", "leaderboard", CODE)
        assert response.status_code == 202, response.text
        submission_id = response.json()["details"]["id"]
        platform.wait_done(cli, submission_id)
        publish_raw(nats_url, "evt.run.completed", b'{"run_id": 12, "not json')
        platform.wait_for(lambda: len(dead_letters(nats_url)) >= 2, "the poison message to be dead-lettered")

        tailed = run_cli(platform, "events", "tail", "--type", "SubmissionFinished", "--submission",
                         str(submission_id), "--from-seq", "1", "--idle", "2", "--json")
        [finished] = [json.loads(line) for line in tailed.stdout.splitlines()]
        assert finished["data"]["submission_id"] == submission_id and finished["data"]["status"] == "succeeded"
        by_board = run_cli(platform, "events", "tail", "--leaderboard", "tools", "--from-seq", "1", "--idle", "2")
        assert "SubmissionAccepted" in by_board.stdout and "RunRequested" not in by_board.stdout.split("\n")[0]

        exported = tmp_path / "events.jsonl"
        run_cli(platform, "events", "export", str(exported))
        lines = records(exported)
        assert [r["seq"] for r in lines] == list(range(1, len(lines) + 1))
        assert all(r["msg_id"] == r["data"]["event_id"] for r in lines if "data" in r and "event_id" in r["data"])
        assert any("data_b64" in r for r in lines)  # the poison message is kept byte for byte

        with start_nats(tmp_path / "restore") as other:
            run_cli(platform, "events", "import", str(exported), "--nats-url", other.url)
            again = run_cli(platform, "events", "import", str(exported), "--nats-url", other.url, check=False)
            resumed = run_cli(platform, "events", "import", str(exported), "--nats-url", other.url, "--resume")
            copy = tmp_path / "copy.jsonl"
            run_cli(platform, "events", "export", str(copy), "--nats-url", other.url)
        assert again.returncode == 1 and "import only into an empty stream" in again.stderr
        assert "Imported 0 events" in resumed.stdout
        strip = ("time",)
        assert [{k: v for k, v in r.items() if k not in strip} for r in records(copy)] == [
            {k: v for k, v in r.items() if k not in strip} for r in lines]

        listed = run_cli(platform, "dlq", "list").stdout
        assert "scorer-run-completed" in listed and "ledger-project" in listed and "ValidationError" in listed
        seq = next(int(line.split()[0]) for line in listed.splitlines() if "scorer-run-completed" in line)
        shown = run_cli(platform, "dlq", "show", str(seq)).stdout
        assert "reason: ValidationError" in shown and '{"run_id": 12, "not json' in shown
        redriven = run_cli(platform, "dlq", "redrive", str(seq)).stdout
        assert f"redriven {seq} as redrive:DEADLETTER:{seq}" in redriven
        # the copy is on its original subject again, and (still poison) is dead-lettered anew
        def redriven_copy_dead_lettered() -> bool:
            rows = [line.split() for line in run_cli(platform, "dlq", "list").stdout.splitlines()[1:]]
            return any(row[3] == str(len(lines) + 1) for row in rows if len(row) > 3)

        platform.wait_for(redriven_copy_dead_lettered, "the redriven copy to be handled")
        run_cli(platform, "dlq", "purge", "--all")
        assert run_cli(platform, "dlq", "list").stdout.strip() == "No dead letters."
        assert run_cli(platform, "dlq", "purge", check=False).returncode == 1  # nothing named: refuse
    finally:
        platform.stop()
