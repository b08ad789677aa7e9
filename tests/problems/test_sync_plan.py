"""Problem sync planning (docs/authoring.md) over a copy of the reference-kernels-style fixture checkout."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from runner.task.competition import CompetitionFileError, load_competition, parse_deadline
from schemas.events import LeaderboardCreated, LeaderboardUpdated
from schemas.precheck_events import PrecheckPolicySet
from services.core.problems.sync import Board, ProblemSetNotFound, plan_sync

FIXTURE = Path(__file__).parents[1] / "fixtures" / "reference_kernels" / "problems"
NOW = datetime(2026, 11, 22, 8, 0, tzinfo=UTC)


@pytest.fixture
def checkout(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "problems"))


def plan(root: Path, boards: dict | None = None, **options):
    defaults = {"problem_set": None, "force": False, "visibility": "public", "now": NOW,
                "new_secret": lambda: 1234, "event_tag": "t1"}
    return plan_sync(root, boards or {}, **{**defaults, **options})


def as_boards(events) -> dict[str, Board]:
    return {e.name: Board(e.name, e.task.model_dump(mode="json"), e.description, e.templates, e.deadline)
            for e in events}


def edit_task(root: Path, directory: str, **changes) -> None:
    path = root / directory / "task.yml"
    task = yaml.safe_load(path.read_text())
    task.update(changes)
    path.write_text(yaml.safe_dump(task, sort_keys=False))


def test_a_fresh_checkout_creates_every_board_with_gpus_deadline_templates_and_inlined_sources(checkout):
    result = plan(checkout)
    assert sorted(result.created) == ["grayscale_v2", "matmul_cu_v2", "trimul", "vectoradd_v2"]
    assert result.skipped == [] and result.errors == []
    events = {e.name: e for e in result.events}
    assert all(isinstance(e, LeaderboardCreated) and e.secret_seed == 1234 for e in events.values())
    vectoradd = events["vectoradd_v2"]
    assert vectoradd.gpus == ["B200", "H100", "A100", "L4"] and vectoradd.visibility == "public"
    assert vectoradd.deadline == datetime(2100, 12, 31, tzinfo=UTC)
    assert vectoradd.task.files["eval.py"] == (checkout / "pmpp_v2" / "eval.py").read_text()
    assert vectoradd.task.files["submission.py"] == "@SUBMISSION@"
    assert vectoradd.templates["Python"].startswith("from task import input_t")
    assert vectoradd.description.startswith("Implement a float16 vector addition kernel.")
    assert events["grayscale_v2"].deadline == datetime(2100, 12, 31, 6, 59, tzinfo=UTC)
    assert events["grayscale_v2"].task.files["eval.py"].startswith('"""grayscale_py\'s own harness')
    assert events["matmul_cu_v2"].gpus == ["H100", "A100"]  # from task.yml: the YAML entry names none
    assert events["matmul_cu_v2"].task.config.defines == {"TILE": "32"}
    trimul = events["trimul"]  # names are stored lower-case
    assert trimul.task.multi_gpu and trimul.task.benchmarks[0]["world_size"] == 8 and trimul.task.ranked_timeout == 1200
    assert plan(checkout, visibility="closed").events[0].visibility == "closed"


def test_a_second_sync_skips_unchanged_boards_and_updates_free_fields_without_force(checkout):
    boards = as_boards(plan(checkout).events)
    again = plan(checkout, boards)
    assert again.created == [] and again.events == []
    assert sorted(s["name"] for s in again.skipped) == sorted(boards)
    assert {s["reason"] for s in again.skipped} == {"no changes"}

    edit_task(checkout, "pmpp_v2/vectoradd_py", description="New words.", benchmark_timeout=300)
    updated = plan(checkout, boards)
    assert updated.updated == ["vectoradd_v2"]
    [event] = updated.events
    assert isinstance(event, LeaderboardUpdated) and event.description == "New words."
    assert event.task.benchmark_timeout == 300 and event.deadline == boards["vectoradd_v2"].deadline


@pytest.mark.parametrize("change", [{"ranking_by": "geom"}, {"seed": 5}, {"tests": [{"size": 1, "seed": 2}]},
                                    {"multi_gpu": False, "benchmarks": [{"size": 3, "seed": 4}]}])
def test_scoring_relevant_changes_need_force(checkout, change):
    boards = as_boards(plan(checkout).events)
    edit_task(checkout, "pmpp_v2/vectoradd_py", **change)
    held = plan(checkout, boards, problem_set="pmpp_v2")
    assert {"name": "vectoradd_v2", "reason": "significant task changes require --force"} in held.skipped
    assert held.events == []
    forced = plan(checkout, boards, problem_set="pmpp_v2", force=True)
    assert forced.updated == ["vectoradd_v2"]


def test_a_missing_deadline_keeps_an_existing_boards_deadline_and_gives_a_new_one_a_year(checkout):
    competition = checkout / "bioml.yaml"
    competition.write_text(competition.read_text().replace('    deadline: "2100-06-30 12:00"\n', ""))
    [created] = plan(checkout, problem_set="bioml").events
    assert created.deadline == datetime(2027, 11, 22, 8, 0, tzinfo=UTC)
    later = plan(checkout, as_boards([created]), problem_set="bioml", now=datetime(2027, 1, 1, tzinfo=UTC))
    assert later.skipped == [{"name": "trimul", "reason": "no changes"}]


def test_broken_entries_are_reported_one_by_one_and_the_rest_still_syncs(checkout):
    (checkout / "broken.yaml").write_text(yaml.safe_dump({"problems": [
        {"directory": "pmpp_v2/vectoradd_py"},
        {"name": "ghost", "directory": "pmpp_v2/nope"},
        {"name": "escape", "directory": "../../etc"},
        {"name": "bad_deadline", "directory": "pmpp_v2/matmul_cu", "deadline": "next tuesday"},
        {"name": "no_gpus", "directory": "pmpp_v2/vectoradd_py"},
        {"name": "Bad Name!", "directory": "pmpp_v2/matmul_cu"},
        {"name": "bad_gpus", "directory": "pmpp_v2/grayscale_py", "gpus": "H100"},
    ]}))
    (checkout / "garbage.yaml").write_text("problems: [unclosed\n")
    edit_task(checkout, "pmpp_v2/grayscale_py", colour="blue")
    result = plan(checkout)
    assert sorted(result.created) == ["matmul_cu_v2", "trimul", "vectoradd_v2"]
    skipped = {s["name"]: s["reason"] for s in result.skipped}
    errors = {e["name"]: e["error"] for e in result.errors}
    assert skipped[""] == "Missing name or directory"
    assert skipped["ghost"] == "Directory pmpp_v2/nope not found"
    assert skipped["escape"] == "Directory ../../etc not found"
    assert skipped["no_gpus"] == "No GPUs specified in task.yml or YAML"
    assert skipped["grayscale_v2"] == ("Failed to parse task.yml: problems/pmpp_v2/grayscale_py/task.yml: colour: "
                                       "unknown field (allowed: files, lang, description, config, templates, "
                                       "libraries, tests, benchmarks, test_timeout, benchmark_timeout, "
                                       "ranked_timeout, ranking_by, seed, multi_gpu, gpus, harness, roofline, validation)")
    assert str(checkout) not in str(result.report())  # no server paths in the report
    assert errors["garbage"].startswith("Invalid YAML: problems/garbage.yaml: invalid YAML")
    assert errors["bad_gpus"] == "broken.yaml: problems[6].gpus: must be a list of GPU names, got 'H100'"
    assert errors["bad name!"].startswith("invalid leaderboard name 'bad name!'")
    assert errors["bad_deadline"] == ("invalid deadline 'next tuesday' (expected YYYY-MM-DD or YYYY-MM-DD HH:MM, "
                                      "read as UTC)")


def test_wrong_types_in_task_yml_name_the_file_and_the_field(checkout):
    edit_task(checkout, "pmpp_v2/vectoradd_py", test_timeout="soon")
    [skip] = [s for s in plan(checkout).skipped if s["name"] == "vectoradd_v2"]
    assert skip["reason"] == ("Failed to parse task.yml: problems/pmpp_v2/vectoradd_py/task.yml: test_timeout: "
                              "must be an integer, got str 'soon'")


def test_a_problem_set_limits_the_sync_and_an_unknown_one_lists_the_available_sets(checkout):
    assert plan(checkout, problem_set="bioml").created == ["trimul"]
    with pytest.raises(ProblemSetNotFound, match=r"Problem set not found. Available: \['bioml', 'pmpp_v2'\]"):
        plan(checkout, problem_set="amd")


def test_the_same_name_twice_in_one_sync_is_created_once(checkout):
    (checkout / "zz_again.yaml").write_text(yaml.safe_dump({"problems": [
        {"name": "vectoradd_v2", "directory": "pmpp_v2/vectoradd_py", "deadline": "2100-12-31"}]}))
    result = plan(checkout)
    assert result.created.count("vectoradd_v2") == 1
    assert {"name": "vectoradd_v2", "reason": "no changes"} in result.skipped


@pytest.mark.parametrize(("text", "expected"), [
    ("2100-12-31", datetime(2100, 12, 31, tzinfo=UTC)),
    ("2025-11-29 6:59", datetime(2025, 11, 29, 6, 59, tzinfo=UTC)),
    ("", datetime(2027, 11, 22, 8, 0, tzinfo=UTC)),
    (None, datetime(2027, 11, 22, 8, 0, tzinfo=UTC)),
])
def test_deadlines_are_naive_utc_and_default_to_a_year(text, expected):
    assert parse_deadline(text, NOW) == expected


def test_a_competition_file_that_is_not_a_problem_list_is_an_error_naming_file_and_field(tmp_path):
    bad = tmp_path / "x.yaml"
    bad.write_text("problems: {a: 1}\n")
    with pytest.raises(CompetitionFileError, match=r"x.yaml: problems: must be a list, got dict"):
        load_competition(bad)
    bad.write_text("- 1\n")
    with pytest.raises(CompetitionFileError, match=r"x.yaml: \(top level\): must be a mapping"):
        load_competition(bad)
    with pytest.raises(ValueError, match="invalid deadline 'soon'"):
        parse_deadline("soon")


def test_a_competition_file_sets_its_precheck_outcomes_per_problem_over_the_files(checkout):

    path = checkout / "pmpp_v2.yaml"
    competition = yaml.safe_load(path.read_text())
    competition["precheck"] = {"thread": "off", "dynamic-code": "hacked"}
    competition["problems"][1]["precheck"] = {"thread": "warn"}
    path.write_text(yaml.safe_dump(competition, sort_keys=False))
    result = plan(checkout)
    policies = {e.leaderboard: e.outcomes for e in result.events if isinstance(e, PrecheckPolicySet)}
    assert policies == {"vectoradd_v2": {"thread": "off", "dynamic-code": "hacked"},
                        "grayscale_v2": {"thread": "warn", "dynamic-code": "hacked"},
                        "matmul_cu_v2": {"thread": "off", "dynamic-code": "hacked"}}
    order = [type(e).__name__ + ":" + getattr(e, "name", getattr(e, "leaderboard", "")) for e in result.events]
    assert order.index("LeaderboardCreated:vectoradd_v2") < order.index("PrecheckPolicySet:vectoradd_v2")
    # kept boards get them again on a later sync; an unknown rule is that problem's error, the others go on
    competition["problems"][0]["precheck"] = {"threads": "off"}
    path.write_text(yaml.safe_dump(competition, sort_keys=False))
    again = plan(checkout, as_boards(e for e in result.events if isinstance(e, LeaderboardCreated)))
    assert {e.leaderboard for e in again.events if isinstance(e, PrecheckPolicySet)} == {"grayscale_v2",
                                                                                         "matmul_cu_v2"}
    assert again.errors == [{"name": "vectoradd_v2", "error": "precheck: unknown pre-check rule 'threads'; rules: "
                             "ctypes, dynamic-code, fd-write, harness-reach, proc-access, side-stream, thread, "
                             "timer-patch"}]
    competition["precheck"] = ["thread"]
    path.write_text(yaml.safe_dump(competition, sort_keys=False))
    with pytest.raises(CompetitionFileError, match="precheck: must be a mapping of rule name to outcome"):
        load_competition(path)


def test_a_roofline_declaration_travels_with_the_task_and_updates_without_force(checkout):
    boards = as_boards(plan(checkout).events)
    benchmarks = yaml.safe_load((checkout / "pmpp_v2" / "vectoradd_py" / "task.yml").read_text())["benchmarks"]
    edit_task(checkout, "pmpp_v2/vectoradd_py", roofline=[{"bytes": 6 * 4096 * (i + 1)} for i in range(len(benchmarks))])
    updated = plan(checkout, boards)
    assert updated.updated == ["vectoradd_v2"] and updated.skipped[0]["reason"] == "no changes"
    [event] = updated.events
    assert [case.bytes for case in event.task.roofline] == [6 * 4096 * (i + 1) for i in range(len(benchmarks))]

    edit_task(checkout, "pmpp_v2/vectoradd_py", roofline=[{"bytes": 8}])  # one entry for several benchmarks
    [broken] = [s for s in plan(checkout, boards).skipped if s["name"] == "vectoradd_v2"]
    assert broken["reason"].endswith(f"roofline: needs one entry per benchmark ({len(benchmarks)}), got 1")
