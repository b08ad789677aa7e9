"""Scores measured on different hardware, end to end with the real services: the scorer can refuse to rank a score
whose fingerprint differs from its board's in what matters, and `kernelbot rejudge --rescore --same-hardware`
withdraws such scores from a board that ranked them. Runs are reported as a remote runner does, with fingerprints."""

from __future__ import annotations

import pytest

from problems import PROBLEMS_ROOT
from schemas.contracts import Fingerprint, GpuFingerprint, SystemInfo
from tests.operate.conftest import GPU, mean_board, ranked_users, report_runs, run_cli
from tests.support.events import archived
from tests.support.in_process import InProcessPlatform

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()


def host(driver: str, uuid: str, temperature_note: str = "") -> SystemInfo:
    gpu = GpuFingerprint(name="NVIDIA H100 80GB HBM3", uuid=uuid, driver=driver, runtime_version="12.4",
                         sm_clock_mhz=1755, power_limit_w=700.0, ecc="enabled")
    return SystemInfo(gpu=GPU, device_count=1, hostname=f"host-{uuid}{temperature_note}",
                      fingerprint=Fingerprint(source="nvml", gpus=[gpu]))


REFERENCE, SAME_KIND, OLDER_DRIVER = host("550.54.15", "GPU-a"), host("550.54.15", "GPU-b"), host("535.104.05", "GPU-c")
MISMATCH = "measured on hardware that differs from the board's on remote (gpu0.driver: 550.54.15 ≠ 535.104.05)"


def submit(platform, database_url, board, user_id, name, mean_ns, system) -> tuple[str, int]:
    cli = platform.register(user_id, name)
    submission_id = platform.submit(cli, board, GPU, "leaderboard", CODE).json()["details"]["id"]
    report_runs(platform, database_url, submission_id, [mean_ns], system=system)
    return cli, submission_id


@pytest.fixture
def same_hardware_platform(nats_url, database_url, tmp_path):
    running = InProcessPlatform(nats_url, database_url, tmp_path, local_gpus={"cpu": 1}, extra_env={"KB_SAME_HARDWARE": "1"})
    running.start()
    yield running
    running.stop()


def test_a_scorer_asked_for_the_same_hardware_refuses_a_score_from_other_hardware(same_hardware_platform,
                                                                                 database_url):
    platform = same_hardware_platform
    platform.add_boards(mean_board("hw_live"))
    alice, _ = submit(platform, database_url, "hw_live", "71", "alice", 20_000.0, REFERENCE)
    bob, bob_id = submit(platform, database_url, "hw_live", "72", "bob", 1_000.0, OLDER_DRIVER)
    carol, _ = submit(platform, database_url, "hw_live", "73", "carol", 10_000.0, SAME_KIND)

    view = platform.wait_done(bob, bob_id)
    assert view["job"]["status"] == "failed"
    assert view["job"]["error"] == f"{MISMATCH}; submission will not appear on the leaderboard"
    platform.wait_for(lambda: ranked_users(platform, "hw_live") == ["carol", "alice"], "the board")
    [rejected] = archived(database_url, "ScoreRejected", str(bob_id))
    assert rejected["reason"] == MISMATCH
    # another GPU of the same configuration (other UUID, other host) is comparable: carol ranks
    [computed] = [e for e in archived(database_url, "ScoreComputed") if e["user_id"] == "73"]
    assert computed["hardware"]["gpu0.driver"] == "550.54.15" and "gpu0.uuid" not in computed["hardware"]

    # a rerun measured on the other host does not score either: alice leaves the board, carol stays
    run_cli(platform, "rejudge", "--leaderboard", "hw_live", "--rerun", "--reason", "harness fix")
    platform.wait_for(lambda: len(archived(database_url, "RerunPlanned")) == 2, "reruns to be planned")
    [request] = archived(database_url, "RejudgeRequested")
    by_user = {e["user_id"]: e["submission_id"] for e in archived(database_url, "ScoreComputed")}
    report_runs(platform, database_url, by_user["71"], [20_000.0], suffix=request["rejudge_id"], system=OLDER_DRIVER)
    report_runs(platform, database_url, by_user["73"], [10_000.0], suffix=request["rejudge_id"], system=SAME_KIND)
    platform.wait_for(lambda: ranked_users(platform, "hw_live") == ["carol"], "alice's rerun withdrawn", 60)
    [withdrawn] = [e for e in archived(database_url, "ScoreRevised") if e["submission_id"] == by_user["71"]]
    assert withdrawn["score"] is None and withdrawn["reason"] == MISMATCH


def test_rejudge_same_hardware_withdraws_scores_measured_elsewhere(remote_platform, database_url):
    platform = remote_platform
    platform.add_boards(mean_board("hw_rejudge"))
    submit(platform, database_url, "hw_rejudge", "74", "alice", 20_000.0, REFERENCE)
    bob, bob_id = submit(platform, database_url, "hw_rejudge", "75", "bob", 1_000.0, OLDER_DRIVER)
    assert platform.wait_done(bob, bob_id)["job"]["status"] == "succeeded"  # by default the scorer compares
    platform.wait_for(lambda: ranked_users(platform, "hw_rejudge") == ["bob", "alice"], "both ranked")

    plain = run_cli(platform, "rejudge", "-l", "hw_rejudge", "--rescore", "--dry-run")
    assert "Warning: the scores on remote were measured on 2 hardware configurations" in plain.stdout
    preview = run_cli(platform, "rejudge", "-l", "hw_rejudge", "--rescore", "--same-hardware", "--dry-run")
    assert "reference hardware only" in preview.stdout and "-> off the board" in preview.stdout
    assert ranked_users(platform, "hw_rejudge") == ["bob", "alice"]  # a dry run changes nothing

    done = run_cli(platform, "rejudge", "-l", "hw_rejudge", "--rescore", "--same-hardware", "--reason", "drivers")
    assert "1 scores revised" in done.stdout
    platform.wait_for(lambda: ranked_users(platform, "hw_rejudge") == ["alice"], "bob withdrawn")
    [revised] = [e for e in archived(database_url, "ScoreRevised") if e["submission_id"] == bob_id]
    assert revised["score"] is None and revised["reason"] == MISMATCH
    assert run_cli(platform, "rejudge", "-l", "hw_rejudge", "--rerun", "--same-hardware", check=False).returncode \
        != 0
