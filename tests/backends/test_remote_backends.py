"""Each remote backend through the whole platform, against its fake: a submission goes in at the gateway, the
dispatcher launches, watches, times out, retries and collects on the fake, and the result comes out ranked or
failed with a reason a person can act on.

The scenarios are submitted at once when the module starts (they run side by side, as on a real platform), those
the fakes run through the real runner when the first (slow) test that needs them starts; each test then waits for
its own. The dispatcher restart and the replica takeover come last.
"""

from __future__ import annotations

import base64
import io
import json
import random
import re
import string
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor

import pytest
from typer.testing import CliRunner

from problems import PROBLEMS_ROOT
from runner.task.payload import encode_payload
from runner.task.taskfile import load_problem
from schemas.contracts import RunPayload
from services.cli.main import app
from tests.backends.conftest import BOARD, HANG_BUDGET_S, PREFIXES, gpu
from tests.support.events import archived, query

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
BACKENDS = sorted(PREFIXES)
SCENARIOS = {"run": "test", "canned": "leaderboard", "hang": "test", "lost": "test", "noresult": "test",
             "refused": "test", "ambiguous": "test", "largest": "test", "between": "test", "profile": "profile"}
MAX_SUBMISSION_BYTES = 1_000_000  # the gateway's limit (services/core/admission/policy.py)
# Incompressible padding: compressed and base64-encoded it stays about 1 MB, more than any inline carrier holds.
_NOISE = random.Random(15)
LARGEST = CODE + "".join(
    "# " + "".join(_NOISE.choices(string.ascii_letters + string.digits, k=97)) + "\n"
    for _ in range((MAX_SUBMISSION_BYTES - len(CODE)) // 100))
LARGEST += "#" * (MAX_SUBMISSION_BYTES - len(LARGEST.encode()))
BY_REFERENCE = {"github", "buildkite"}  # backends whose field cannot hold it; Modal and Slurm carry it whole
# Between the two inline limits: encoded, more than a GitHub dispatch input holds (65,535 characters) and less than
# Buildkite's environment variable takes, so only GitHub hands it over by reference.
BETWEEN = CODE + "".join("# " + "".join(_NOISE.choices(string.ascii_letters + string.digits, k=97)) + "\n"
                         for _ in range(560))
BETWEEN_BY_REFERENCE = {"github"}


def scenario_gpu(backend: str, behaviour: str) -> str:
    return gpu(backend, "run" if behaviour in ("largest", "between", "profile") else behaviour)


# Scenarios whose jobs the fakes run through the real runner: only the slow tests wait for those.
ON_THE_RUNNER = ("run", "largest", "between", "profile")


def _submit_all(world, behaviours) -> dict[tuple[str, str], int]:
    def submit(scenario: tuple[str, str]) -> int:
        backend, behaviour = scenario
        code = {"largest": LARGEST, "between": BETWEEN}.get(behaviour, CODE)
        response = world.platform.submit(world.cli, BOARD, scenario_gpu(backend, behaviour), SCENARIOS[behaviour],
                                         code)
        assert response.status_code == 202, response.text
        return response.json()["details"]["id"]

    scenarios = [(backend, behaviour) for behaviour in behaviours for backend in BACKENDS]
    with ThreadPoolExecutor(len(scenarios)) as pool:  # side by side, as users would
        return dict(zip(scenarios, pool.map(submit, scenarios), strict=True))


@pytest.fixture(scope="module")
def submitted(world) -> dict[tuple[str, str], int]:
    return _submit_all(world, [behaviour for behaviour in SCENARIOS if behaviour not in ON_THE_RUNNER])


@pytest.fixture(scope="module")
def submitted_on_the_runner(world) -> dict[tuple[str, str], int]:
    return _submit_all(world, ON_THE_RUNNER)


def _done(world, submission_id: int) -> dict:
    return world.platform.wait_done(world.cli, submission_id, timeout=75)


def _failures(world, submission_id: int) -> list[dict]:
    return archived(world.database_url, "RunFailed", str(submission_id))


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_job_runs_the_real_runner_and_its_result_comes_back(world, submitted, submitted_on_the_runner, backend):
    submission_id = submitted_on_the_runner[backend, "run"]
    view = _done(world, submission_id)
    assert view["job"]["status"] == "succeeded", view
    [completed] = archived(world.database_url, "RunCompleted", str(submission_id))
    assert completed["backend"] == backend
    assert completed["result"]["system"]["runtime"] == "CPU"  # written by the runner the fake really ran
    assert completed["result"]["runs"]["test"]["run"]["passed"] is True
    [dispatched] = archived(world.database_url, "RunDispatched", str(submission_id))
    assert dispatched["backend"] == backend and dispatched["job_ref"]
    assert world.fakes[backend].jobs.launches_of(completed["run_id"]) == [f"{completed['run_id']}.1"]
    [job] = [j for j in world.fakes[backend].jobs.jobs.values() if j.key == f"{completed['run_id']}.1"]
    assert job.payload.arch == (None if backend == "github" else "90a")  # the catalogue's arch travels
    if backend == "github":
        assert world.fakes["github"].runner_labels[int(dispatched["job_ref"])] == "amdgpu-mi300-x86-64"
        # the other scenarios' GPUs dispatch the NVIDIA workflow, as they are launched
        world.platform.wait_for(lambda: world.fakes["github"].workflows.keys() >= {"amd_workflow.yml",
                                                                                 "nvidia_workflow.yml"},
                                "both workflows dispatched", 30)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_profile_comes_back_in_the_same_shape_from_every_backend(world, submitted_on_the_runner, backend):
    """The runner builds the profile (runner/stages/profile_stage.py) and it travels inside the run's result, whatever
    carries that result back: each case's zip of details and manifest, and the head of the details in the report.
    The dispatcher keeps each zip in `profile_traces` as it records the run (the event carries an empty trace)."""
    submission_id = submitted_on_the_runner[backend, "profile"]
    # it queues behind the `run` and `largest` scenarios on the same GPU, then runs two cases
    view = world.platform.wait_done(world.cli, submission_id, timeout=180)
    assert view["job"]["status"] == "succeeded", view
    [completed] = archived(world.database_url, "RunCompleted", str(submission_id))
    assert completed["backend"] == backend
    assert sorted(completed["result"]["runs"]) == ["profile.0", "profile.1"]
    for key, stage in completed["result"]["runs"].items():
        assert stage["profile"]["profiler"] == "torch.profiler"
        assert stage["profile"]["trace"] == ""
        [kept] = query(world.database_url, "SELECT trace FROM profile_traces WHERE run_id = $1 AND stage = $2",
                       completed["run_id"], key)
        with zipfile.ZipFile(io.BytesIO(base64.b64decode(kept["trace"]))) as archive:
            names = {name.split("/", 1)[1] for name in archive.namelist()}
            manifest = json.loads(archive.read(next(n for n in archive.namelist() if n.endswith("manifest.json"))))
        assert names == {"torch-details.txt", "torch-details.csv", "manifest.json"}
        assert manifest["benchmark"]["index"] == int(key[-1])


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_largest_accepted_submission_runs_on_every_backend(world, submitted_on_the_runner, backend):
    """1,000,000 bytes of incompressible code: GitHub's dispatch inputs and Buildkite's environment variable cannot
    hold it, so those two hand the runner a single-use link on the gateway; Modal and Slurm carry it whole."""
    assert len(LARGEST.encode()) == MAX_SUBMISSION_BYTES
    submission_id = submitted_on_the_runner[backend, "largest"]
    view = _done(world, submission_id)
    assert view["job"]["status"] == "succeeded", view
    assert view["code"] == LARGEST
    [completed] = archived(world.database_url, "RunCompleted", str(submission_id))
    assert completed["backend"] == backend
    assert completed["result"]["runs"]["test"]["run"]["passed"] is True  # the real runner ran all of it
    [job] = [j for j in world.fakes[backend].jobs.jobs.values() if j.key == f"{completed['run_id']}.1"]
    assert (job.payload is None) == (backend in BY_REFERENCE)  # by reference exactly where it must be
    left = query(world.database_url, "SELECT count(*) AS n FROM runner_payloads WHERE launch_key = $1",
                 f"{completed['run_id']}.1")
    assert left[0]["n"] == 0  # the link was used up


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_submission_between_the_inline_limits_goes_by_reference_only_where_it_must(
        world, submitted_on_the_runner, backend):
    task = load_problem(PROBLEMS_ROOT / "examples" / "identity_py").task
    payload = RunPayload(run_id="1.gpu", gpu="gpu", lang="py", mode="test",
                         sources={**task.files, "submission.py": BETWEEN})
    # more than GitHub's cap on its inputs, well below Linux's 128 KiB per variable
    assert 65_535 + 10_000 < len(encode_payload(payload)) < 100_000
    submission_id = submitted_on_the_runner[backend, "between"]
    view = _done(world, submission_id)
    assert view["job"]["status"] == "succeeded", view
    assert view["code"] == BETWEEN
    [completed] = archived(world.database_url, "RunCompleted", str(submission_id))
    [job] = [j for j in world.fakes[backend].jobs.jobs.values() if j.key == f"{completed['run_id']}.1"]
    assert (job.payload is None) == (backend in BETWEEN_BY_REFERENCE)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_ranked_submission_on_the_backend_is_ranked(world, submitted, backend):
    submission_id = submitted[backend, "canned"]
    view = _done(world, submission_id)
    assert view["job"]["status"] == "succeeded", view
    ranking = world.platform.ranking(BOARD, gpu(backend, "canned"))
    assert submission_id in [row["submission_id"] for row in ranking]
    completed = archived(world.database_url, "RunCompleted", str(submission_id))
    assert sorted(e["secret"] for e in completed) == [False, True]  # the public and the secret run, once each
    assert len(world.fakes[backend].jobs.launches_of(f"{submission_id}.{gpu(backend, 'canned')}.secret")) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_job_that_never_finishes_is_cancelled_and_fails_as_timeout(world, submitted, backend):
    submission_id = submitted[backend, "hang"]
    started = time.monotonic()
    _done(world, submission_id)
    [failed] = _failures(world, submission_id)
    assert failed["reason"] == "timeout"
    assert f"budget of {HANG_BUDGET_S} s" in failed["detail"] and backend in failed["detail"]
    run_id = failed["run_id"]
    assert f"{run_id}.1" in world.fakes[backend].jobs.cancellations  # cancelled on the backend itself
    assert world.fakes[backend].jobs.launches_of(run_id) == [f"{run_id}.1"]  # a timeout is not retried
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_lost_job_is_relaunched_then_fails_with_a_reason(world, submitted, backend):
    submission_id = submitted[backend, "lost"]
    _done(world, submission_id)
    [failed] = _failures(world, submission_id)
    assert failed["reason"] == "lost"
    assert "gave up after 2 attempts" in failed["detail"]
    assert world.fakes[backend].jobs.launches_of(failed["run_id"]) == [f"{failed['run_id']}.1",
                                                                        f"{failed['run_id']}.2"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_job_without_a_result_artifact_is_retried_then_fails_with_a_reason(world, submitted, backend):
    submission_id = submitted[backend, "noresult"]
    _done(world, submission_id)
    [failed] = _failures(world, submission_id)
    assert failed["reason"] == "lost"
    expected = {"github": "without a run-result artifact", "buildkite": "left no result.json artifact",
                "slurm": "left no", "modal": "returned no result"}[backend]
    assert expected in failed["detail"], failed["detail"]
    assert len(world.fakes[backend].jobs.launches_of(failed["run_id"])) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_refused_launch_is_retried_then_fails_saying_what_to_fix(world, submitted, backend):
    submission_id = submitted[backend, "refused"]
    _done(world, submission_id)
    [failed] = _failures(world, submission_id)
    assert failed["reason"] == "launch_error" and "gave up after 2 attempts" in failed["detail"]
    expected = {"github": "KB_GITHUB_TOKEN", "buildkite": "KB_BUILDKITE_TOKEN", "slurm": "QOS policy",
                "modal": "modal deploy deploy/modal/app.py"}[backend]
    assert expected in failed["detail"], failed["detail"]
    assert world.fakes[backend].jobs.launches_of(failed["run_id"]) == []  # nothing ever ran


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_launch_whose_answer_was_lost_is_asked_again_and_finds_its_job(world, submitted, backend):
    """The backend started the job but its answer never arrived (a 5xx): asking again with the same launch key
    finds that job (by run name, build meta-data, job name, or the Modal function's claim) instead of a second."""
    submission_id = submitted[backend, "ambiguous"]
    assert _done(world, submission_id)["job"]["status"] == "succeeded"
    [completed] = archived(world.database_url, "RunCompleted", str(submission_id))
    assert world.fakes[backend].jobs.launches_of(completed["run_id"]) == [f"{completed['run_id']}.1"]
    [job] = [j for j in world.fakes[backend].jobs.jobs.values() if j.key == f"{completed['run_id']}.1"]
    assert job.answered_badly  # the first answer really was lost
    [dispatched] = archived(world.database_url, "RunDispatched", str(submission_id))
    assert dispatched["attempt"] == 1


def _cli(world, *args: str):
    """The `kernelbot` command, as an operator runs it against this platform."""
    env = {"KB_DATABASE_URL": world.database_url, "KB_URL": world.platform.url, "KB_CLI_ID": world.cli}
    return CliRunner().invoke(app, list(args), env=env)


def test_verify_runs_reports_each_backend_s_result(world):
    gpus = [gpu(backend, "canned") for backend in BACKENDS] + [gpu("github", "lost")]
    done = _cli(world, "verify-runs", "--leaderboard", BOARD, *(f"--gpu={name}" for name in gpus))
    assert done.exit_code == 1, done.output  # one GPU failed
    lines = {line.split()[1]: line for line in done.stdout.splitlines() if line.startswith(("OK", "FAIL"))}
    assert set(lines) == set(gpus), done.output
    for backend in BACKENDS:
        assert lines[gpu(backend, "canned")].startswith("OK") and backend in lines[gpu(backend, "canned")]
    assert lines[gpu("github", "lost")].startswith("FAIL"), done.stdout


@pytest.mark.slow
def test_verify_runs_reports_the_start_up_time_of_each_stage_it_sees(world):
    """A backend that really runs the runner image (the fakes' `run` behaviour): its stages fork from a warm
    runner, and verify-runs shows how long each took to start."""
    name = gpu("modal", "run")
    done = _cli(world, "verify-runs", "--leaderboard", BOARD, f"--gpu={name}")
    assert done.exit_code == 0, done.output
    [line] = [line for line in done.stdout.splitlines() if line.startswith("OK")]
    assert re.search(r"test start-up \d+\.\d{3} s \(warm\)", line), line


def _launched_everywhere(world, run_ids: list[str]) -> bool:
    rows = query(world.database_url, "SELECT run_id FROM dispatch_runs WHERE status = 'launched' "
                                     "AND run_id = ANY($1::text[])", run_ids)
    return len(rows) == len(run_ids)


def _submit_slow_jobs(world) -> tuple[dict[str, int], dict[str, str]]:
    """A job on every backend that runs until the test opens the fakes' gate; once each is launched."""
    for fake in world.fakes.values():
        fake.jobs.gate.clear()
    with ThreadPoolExecutor(len(BACKENDS)) as pool:
        responses = dict(zip(BACKENDS, pool.map(
            lambda backend: world.platform.submit(world.cli, BOARD, gpu(backend, "slow"), "test", CODE), BACKENDS)))
    assert all(r.status_code == 202 for r in responses.values()), [r.text for r in responses.values()]
    ids = {backend: response.json()["details"]["id"] for backend, response in responses.items()}
    run_ids = {backend: f"{sid}.{gpu(backend, 'slow')}.test" for backend, sid in ids.items()}
    world.platform.wait_for(lambda: _launched_everywhere(world, list(run_ids.values())), "every job launched", 30)
    return ids, run_ids


def _finish_and_check_once(world, ids: dict[str, int], run_ids: dict[str, str]) -> None:
    for fake in world.fakes.values():
        fake.jobs.gate.set()  # the jobs finish under the new dispatcher's watch
    for backend, submission_id in ids.items():
        assert _done(world, submission_id)["job"]["status"] == "succeeded"
        assert len(archived(world.database_url, "RunCompleted", str(submission_id))) == 1
        assert not _failures(world, submission_id)
        assert world.fakes[backend].jobs.launches_of(run_ids[backend]) == [f"{run_ids[backend]}.1"], backend


def _owners(world, run_ids: dict[str, str]) -> set[str | None]:
    rows = query(world.database_url, "SELECT lease_owner FROM dispatch_runs WHERE run_id = ANY($1::text[])",
                 list(run_ids.values()))
    return {row["lease_owner"] for row in rows}


@pytest.mark.slow
def test_a_dispatcher_killed_mid_job_resumes_every_job_without_launching_twice(world):
    """SIGKILL the dispatcher while a job runs on every backend; the restarted one collects them all, once."""
    platform = world.platform
    ids, run_ids = _submit_slow_jobs(world)

    listing = _cli(world, "runners")
    assert listing.exit_code == 0, listing.output
    for backend, run_id in run_ids.items():
        [row] = [line for line in listing.stdout.splitlines() if line.startswith(gpu(backend, "slow") + " ")]
        assert row.split()[1] == backend and row.split()[-1] == "1", row  # one running job
        assert run_id in listing.stdout

    platform.kill("dispatcher")  # jobs keep running on their backends meanwhile
    platform.start("dispatcher")
    _finish_and_check_once(world, ids, run_ids)


@pytest.mark.slow
def test_another_replica_takes_over_the_jobs_of_a_dead_one(world):
    """Replicas share the queue: when one dies, another claims its runs once their leases lapse and watches the
    jobs already launched, starting none again."""
    platform = world.platform
    ids, run_ids = _submit_slow_jobs(world)
    assert _owners(world, run_ids) == {"test-dispatcher"}
    log = open(platform.workdir / "replica-b.log", "ab")  # noqa: SIM115 - the child writes it
    replica = subprocess.Popen([sys.executable, "-m", "services.cli", "serve", "dispatcher"],
                               env=platform.env() | {"KB_WORKER_ID": "replica-b"}, stdout=log,
                               stderr=subprocess.STDOUT)
    try:
        platform.kill("dispatcher")
        platform.wait_for(lambda: _owners(world, run_ids) == {"replica-b"}, "replica-b to take the runs over", 30)
        _finish_and_check_once(world, ids, run_ids)
    finally:
        replica.terminate()
        replica.wait(15)
        log.close()
        platform.start("dispatcher")
