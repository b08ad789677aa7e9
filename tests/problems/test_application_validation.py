"""task.yml's `validation:` block, both forms (docs/authoring.md "Application validation"): loaded with clear errors,
synced through `kernelbot problems sync` into the stored task the events carry and the API shows, passed by
`kernelbot problems check`, and carried over from an upstream deployment's stored task."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from runner.task.taskfile import TaskFileError, load_problem
from services.operate.upstream_catalogue import Report, boards
from services.operate.upstream_source import Catalogue
from tests.support.events import archived
from tests.support.in_process import InProcessPlatform
from tests.support.platform import ADMIN_TOKEN

FIXTURES = Path(__file__).parents[1] / "fixtures"
FIXTURE = FIXTURES / "application_validation"
LINALG = FIXTURE / "problems" / "linalg"
CATALOGUE = FIXTURES / "problem_families" / "catalogue.yaml"


@pytest.fixture
def checkout(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "reference-kernels"))


def edit_validation(checkout: Path, directory: str, validation) -> Path:
    path = checkout / "problems" / "linalg" / directory / "task.yml"
    task = yaml.safe_load(path.read_text())
    task["validation"] = validation
    path.write_text(yaml.safe_dump(task, sort_keys=False))
    return path.parent


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`kernelbot ...` as its own process, as an organiser runs it."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    return subprocess.run([sys.executable, "-m", "services.cli", *args], env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_long_form_is_stored_with_its_own_files_limits_schedule_settings_and_shapes():
    validation = load_problem(LINALG / "cholesky_py").task.validation
    assert validation is not None
    assert (validation.version, validation.name, validation.main) == (
        "cholesky-mini-training-v1", "mini-training", "validation.py")
    assert validation.files["submission.py"] == "@SUBMISSION@"
    assert validation.files["validation.py"] == (LINALG / "cholesky_py" / "validation.py").read_text()
    assert set(validation.files) == {"submission.py", "task.py", "validation.py"}
    assert not validation.includes_task_files
    assert (validation.timeout, validation.top_k, validation.max_concurrency) == (600, 5, 3)
    assert validation.schedule is not None
    assert (validation.schedule.hour, validation.schedule.minute, validation.schedule.timezone) == (
        21, 30, "Europe/Berlin")
    assert validation.settings == {"samples": 32, "learning_rate": 0.25, "require_exact": True}
    assert validation.shapes == [{"batch": 64, "n": 32, "steps": 4}, {"batch": 2, "n": 1024, "steps": 4}]


def test_the_short_form_is_the_script_beside_the_tasks_files_with_upstreams_defaults():
    problem = load_problem(LINALG / "cholesky_short_py")
    validation = problem.task.validation
    assert validation is not None
    assert validation.version == "cholesky-mini-training-v1"
    assert validation.files == {"validation.py": (LINALG / "cholesky_short_py" / "validation.py").read_text()}
    assert validation.includes_task_files and validation.main == "validation.py"
    assert (validation.timeout, validation.top_k, validation.max_concurrency, validation.schedule) == (900, 10, 2, None)
    # the validation is no part of what is judged: the task's hash covers its files alone
    assert problem.task_hash == load_problem(LINALG / "cholesky_py").task_hash


SHORT = {"version": "v1", "script": "validation.py"}
LONG = {"version": "v1", "main": "validation.py", "files": [
    {"name": "submission.py", "source": "@SUBMISSION@"}, {"name": "validation.py", "source": "validation.py"}]}


@pytest.mark.parametrize(("validation", "message"), [
    ({"version": "v1", "script": "missing.py"}, "validation.script: 'missing.py' is not a file in "),
    ({"version": "v1", "script": "../../../../etc/passwd"}, "validation.script: '../../../../etc/passwd' resolves "
                                                             "outside the checkout root"),
    ({"version": "", "script": "validation.py"}, "validation.version: must be a non-empty string"),
    ({"version": 2, "script": "validation.py"}, "validation.version: must be a non-empty string (quote a number"),
    ({"script": "validation.py"}, "validation.version: must be a non-empty string"),
    ({**SHORT, "main": "validation.py"}, "validation.main: unknown key beside `script`"),
    ({**LONG, "retries": 3}, "validation.retries: unknown key (allowed: name, version, main, files"),
    ({"version": "v1", "files": LONG["files"]}, "validation.main: required without `script`"),
    ({**LONG, "main": "other.py"}, "validation.main: 'other.py' is not the name of an entry in validation.files"),
    ({**LONG, "main": "submission.py"}, "validation.main: 'submission.py' is the submission"),
    ({**LONG, "files": LONG["files"][1:]}, "validation.files: exactly one entry must have source @SUBMISSION@"),
    ({**LONG, "timeout": 0}, "validation.timeout: must be an integer >= 1, got 0"),
    ({**LONG, "top_k": "ten"}, "validation.top_k: must be an integer, got str 'ten'"),
    ({**LONG, "schedule": {"hour": 24, "timezone": "UTC"}}, "validation.schedule: 24:00 is not a time of day"),
    ({**LONG, "schedule": {"hour": 22, "timezone": "Pacific"}}, "validation.schedule.timezone: 'Pacific' is not an "
                                                                "IANA time zone"),
    ({**LONG, "settings": {"start": datetime(2026, 7, 26).date()}}, "validation.settings.start: must be a number, a "
                                                                     "string, a boolean, a list or a mapping"),
    ({**LONG, "shapes": [{"n": float("nan")}]}, "validation.shapes[0].n: must be a finite number"),
    ("validation.py", "validation: must be a mapping, got str"),
])
def test_a_bad_validation_block_names_the_file_and_the_key(checkout, validation, message):
    directory = edit_validation(checkout, "cholesky_short_py", validation)
    with pytest.raises(TaskFileError) as raised:
        load_problem(directory)
    assert str(raised.value).startswith(f"{directory / 'task.yml'}: ")
    assert message in str(raised.value)


def test_a_task_file_of_the_scripts_name_with_other_content_is_refused(checkout):
    directory = checkout / "problems" / "linalg" / "cholesky_short_py"
    (directory / "other_validation.py").write_text("print('another script')\n")
    edit_validation(checkout, "cholesky_short_py", {"version": "v1", "script": "other_validation.py"})
    task = yaml.safe_load((directory / "task.yml").read_text())
    task["files"].append({"name": "validation.py", "source": "validation.py"})
    (directory / "task.yml").write_text(yaml.safe_dump(task, sort_keys=False))
    with pytest.raises(TaskFileError, match="validation.script: the task's files have another 'validation.py'"):
        load_problem(directory)


@pytest.fixture
def platform(nats_url, database_url, tmp_path):
    running = InProcessPlatform(nats_url, database_url, tmp_path)
    running.start("ledger", "gateway")
    yield running
    running.stop()


def test_problems_sync_stores_both_forms_and_the_api_shows_them(platform, checkout):
    env = {"KB_ADMIN_TOKEN": ADMIN_TOKEN}
    done = cli("problems", "sync", str(checkout), "--url", platform.url, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "created  cholesky" in done.stdout and "created  cholesky-short" in done.stdout, done.stdout

    shown = {board["name"]: board["task"] for board in platform.http.get("/leaderboards").json()}
    long, short = shown["cholesky"]["validation"], shown["cholesky-short"]["validation"]
    assert (long["version"], long["main"], long["top_k"], long["schedule"]) == (
        "cholesky-mini-training-v1", "validation.py", 5, {"hour": 21, "minute": 30, "timezone": "Europe/Berlin"})
    assert long["shapes"][1] == {"batch": 2, "n": 1024, "steps": 4}
    assert short["includes_task_files"] is True and set(short["files"]) == {"validation.py"}
    created = {event["name"]: event["task"] for event in archived(platform.database_url, "LeaderboardCreated")}
    assert created["cholesky"]["validation"] == long and created["cholesky-short"]["validation"] == short

    # A new contract version changes no score: applied without --force.
    edit_validation(checkout, "cholesky_short_py", {"version": "cholesky-mini-training-v2", "script": "validation.py"})
    done = cli("problems", "sync", str(checkout), "--url", platform.url, env=env)
    assert done.returncode == 0 and "updated  cholesky-short" in done.stdout, done.stdout + done.stderr
    assert "skipped  cholesky: no changes" in done.stdout
    shown = {board["name"]: board["task"] for board in platform.http.get("/leaderboards").json()}
    assert shown["cholesky-short"]["validation"]["version"] == "cholesky-mini-training-v2"


def test_problems_check_passes_both_forms_and_checks_the_scripts_imports(checkout):
    done = cli("problems", "check", str(FIXTURE), "--catalogue", str(CATALOGUE))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["ok    linalg.yaml/cholesky: B200 (nvidia)",
                                        "ok    linalg.yaml/cholesky-short: B200 (nvidia)", "2 ok, 0 failed"]

    script = checkout / "problems" / "linalg" / "cholesky_py" / "validation.py"
    script.write_text("import jax\n" + script.read_text())  # the script runs in the same image as the harness
    done = cli("problems", "check", str(checkout), "--catalogue", str(CATALOGUE))
    assert done.returncode == 1
    assert "FAIL  linalg.yaml/cholesky: B200: the nvidia image does not provide jax" in done.stdout, done.stdout


def upstream_task(validation) -> dict:
    """A task as upstream KernelBot stores it (LeaderboardTask.to_dict)."""
    return {"lang": "py", "files": {"eval.py": "# harness\n", "submission.py": "@SUBMISSION@"},
            "config": {"main": "eval.py"}, "libraries": [], "tests": [{"n": 1}], "test_timeout": 180,
            "benchmarks": [{"n": 8}], "benchmark_timeout": 180, "ranked_timeout": 180, "ranking_by": "geom",
            "seed": None, "multi_gpu": False, "validation": validation}


def upstream_catalogue(*tasks: dict) -> Catalogue:
    rows = [{"id": index + 1, "name": f"board-{index + 1}", "task": task, "deadline": "2100-01-01T00:00:00",
             "description": "d", "visibility": "public", "secret_seed": 7, "creator_id": 0, "forum_id": None}
            for index, task in enumerate(tasks)]
    return Catalogue(boards=rows, gpus=[{"leaderboard_id": row["id"], "gpu_type": "B200"} for row in rows])


def test_an_upstream_board_with_validation_is_imported_with_it():
    script = "print('{\"passed_shapes\": 1}')\n"
    report = Report()
    events, known = boards(upstream_catalogue(upstream_task({"version": "cholesky-v1", "source": script}),
                                              upstream_task(None)), {}, report)
    validation = known[1].task.validation
    assert validation is not None and (validation.version, validation.files) == ("cholesky-v1", {"validation.py": script})
    assert validation.includes_task_files
    assert events[0].task.validation == validation  # the LeaderboardCreated event carries it
    assert known[2].task.validation is None and report.problems == []


def test_an_unreadable_upstream_validation_leaves_the_board_imported_without_it():
    report = Report()
    _, known = boards(upstream_catalogue(upstream_task({"version": "", "source": "x"})), {}, report)
    assert known[1].task.validation is None
    assert report.problems == ["board 'board-1': application validation not readable, imported without it (String "
                               "should have at least 1 character)"]
