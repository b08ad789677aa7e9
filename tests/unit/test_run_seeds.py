"""Per-run secret seeds (services/dispatcher/seeds.py): one seed per run, from the board's seed key and the run id."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from runner.task.payload import build_payload
from schemas.contracts import SUBMISSION_MARKER, PyConfig, Task
from services.dispatcher import planning
from services.dispatcher.seeds import KEY_BYTES, new_seed_key, run_seed

KEY = bytes(range(32))


def test_a_known_answer_pins_the_derivation():
    """HMAC-SHA256(key, "kernelbot-run-seed:" + run id), first 64 bits mod 2**31 - 1, plus one."""
    assert run_seed(KEY, "7.H100.secret") == 66551737
    digest = hmac.new(KEY, b"kernelbot-run-seed:7.H100.secret", hashlib.sha256).digest()
    assert run_seed(KEY, "7.H100.secret") == int.from_bytes(digest[:8], "big") % (2**31 - 1) + 1


def test_one_run_always_gets_the_same_seed_and_every_run_its_own():
    runs = [run.run_id for sub in range(1, 400) for run in planning.plan_runs(sub, "leaderboard", ["H100", "A100"])
            if run.secret]
    runs += [run.run_id for run in planning.rerun_runs(7, ["H100"], "rj-1") + planning.rerun_runs(7, ["H100"], "rj-2")
             if run.secret]
    seeds = [run_seed(KEY, run_id) for run_id in runs]
    assert seeds == [run_seed(KEY, run_id) for run_id in runs]  # a relaunch of a run is judged on the same data
    assert len(set(seeds)) == len(runs)  # no two runs share a seed, reruns of one submission included
    assert all(1 <= seed < 2**31 for seed in seeds)  # never 0, which several harnesses read as "no seed"


def test_boards_with_different_keys_give_one_run_unrelated_seeds():
    other = bytes(31) + b"\x01"
    assert run_seed(KEY, "7.H100.secret") != run_seed(other, "7.H100.secret")
    assert new_seed_key() != new_seed_key() and len(new_seed_key()) == KEY_BYTES


@pytest.mark.parametrize("key", [b"", (1_634_092_187).to_bytes(4, "big"), bytes(16)])
def test_a_short_key_is_refused(key):
    """A key as short as the board's old 31-bit secret falls to a brute force from one leaked seed and run id."""
    with pytest.raises(ValueError, match="32 bytes"):
        run_seed(key, "7.H100.secret")


def test_the_payload_carries_the_runs_seed_and_nothing_of_the_key():
    task = Task(lang="py", files={"submission.py": SUBMISSION_MARKER, "eval.py": ""}, config=PyConfig(main="eval.py"),
                tests=[{"seed": 1}])
    seed = run_seed(KEY, "7.cpu.secret")
    payload = build_payload(task, "code", run_id="7.cpu.secret", gpu="cpu", mode="private", secret=True, seed=seed)
    text = payload.model_dump_json()
    assert payload.seed == seed
    assert KEY.hex() not in text and "seed_key" not in text and "secret_seed" not in text
