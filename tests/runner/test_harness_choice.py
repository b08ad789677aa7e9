"""Which harness judges a run (runner/task/harness_choice.py), how a problem or a competition asks for ours, and how the
report and the score show it. The runs themselves are in tests/exploits/test_refkernels_harness.py."""

from __future__ import annotations

import importlib
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from problems import PROBLEMS_ROOT
from runner.task import harness_choice
from runner.task.competition import CompetitionFileError, load_competition
from runner.task.harness_choice import STOCK_EVAL_PY, choose_harness, content_sha256
from runner.task.payload import build_payload
from runner.task.taskfile import TaskFileError, load_problem
from services.cli.main import app
from services.core.presentation.longreport import long_report
from services.core.presentation.reports import render_text
from services.core.problems.sync import Board, plan_sync

FIXTURE = Path(__file__).parents[1] / "fixtures" / "reference_kernels" / "problems"
VECTORADD = FIXTURE / "pmpp_v2" / "vectoradd_py"
STOCK = (FIXTURE / "pmpp_v2" / "eval.py").read_text(encoding="utf-8")
OUR_EVAL = (PROBLEMS_ROOT / "examples" / "eval.py").read_text(encoding="utf-8")


def payload_for(task, harness: str = "kernelbot", **files: str):
    task = task.model_copy(update={"harness": harness, "files": {**task.files, **files}})
    return build_payload(task, "def custom_kernel(data):\n    return data[2]\n", run_id="r", gpu="cpu",
                         mode="test", secret=False, seed=None)


def test_the_fixture_harness_is_a_known_stock_version():
    assert STOCK_EVAL_PY[content_sha256(STOCK)].startswith("pmpp_v2 eval.py")


def test_a_stock_harness_asked_for_ours_is_replaced_by_our_supervisor_and_worker():
    task = load_problem(VECTORADD).task
    plan = choose_harness(payload_for(task))
    assert plan.protected and plan.info["kind"] == "kernelbot"
    assert plan.info["version"] == harness_choice._version(harness_choice.PY_VERSION, OUR_EVAL) + " +reference-kernels"
    assert plan.payload.sources["eval.py"] == OUR_EVAL  # the stock file is not even written
    assert {"harness_supervisor.py", "harness_measure.py", "harness_batch.py", "harness_group.py", "harness_worker.py",
            "harness_wire.py", "harness_refkernels.py"} <= set(plan.payload.sources)
    for name in ("reference.py", "task.py", "utils.py", "submission.py"):  # the problem's own files stay
        assert plan.payload.sources[name] == payload_for(task).sources[name]


def test_our_harness_ships_whole_wherever_it_goes(monkeypatch):
    """eval.py imports its sibling files from the run directory: every bundled problem that runs it lists them all,
    the reference-kernels path ships the same ones, and the worker never gets the supervisor's."""
    examples = PROBLEMS_ROOT / "examples"
    siblings = {path.name for path in examples.glob("harness_*.py")} - {"harness_refkernels.py"}
    assert siblings == {"harness_supervisor.py", "harness_measure.py", "harness_batch.py", "harness_group.py",
                        "harness_worker.py", "harness_wire.py"}
    assert siblings | {"harness_refkernels.py"} == set(harness_choice.OUR_PY_FILES)
    bundled = [load_problem(task_yml.parent).task for task_yml in sorted(examples.glob("*/task.yml"))]
    assert len(bundled) >= 5
    for task in bundled:
        assert task.config.main == "eval.py" and task.files["eval.py"] == OUR_EVAL
        for name in siblings:
            assert task.files[name] == (examples / name).read_text(), name
    monkeypatch.syspath_prepend(str(examples))
    supervisor = importlib.import_module("harness_supervisor")
    assert {"reference.py", "harness_refkernels.py", "harness_supervisor.py", "harness_measure.py", "harness_batch.py",
            "harness_group.py", "harness_contract.json"} <= set(supervisor.HIDDEN_FROM_WORKER)


def test_ours_is_the_default_where_the_problem_fits_it():
    """The fixture's task.yml says nothing about the harness: its stock eval.py is replaced by ours."""
    task = load_problem(VECTORADD).task
    assert task.harness == "kernelbot"
    plan = choose_harness(build_payload(task, "x", run_id="r", gpu="cpu", mode="test", secret=False, seed=None))
    assert plan.protected and plan.payload.sources["eval.py"] == OUR_EVAL


def test_a_problem_that_does_not_fit_keeps_its_own_harness_by_default_marked_unprotected():
    grayscale = load_problem(FIXTURE / "pmpp_v2" / "grayscale_py").task  # ships its own eval.py
    assert grayscale.harness == "kernelbot"
    plan = choose_harness(build_payload(grayscale, "x", run_id="r", gpu="cpu", mode="test", secret=False, seed=None))
    assert not plan.protected and plan.info["kind"] == "problem"
    assert plan.payload.sources["eval.py"] == grayscale.files["eval.py"]
    assert "is not a known stock reference-kernels harness" in plan.info["reason"]


def test_asking_for_the_problems_own_harness_keeps_it_marked_unprotected():
    task = load_problem(VECTORADD).task
    plan = choose_harness(payload_for(task, harness="problem"))
    assert not plan.protected and plan.info["kind"] == "problem"
    assert plan.payload.sources["eval.py"] == STOCK
    assert plan.info["version"] == f"problem eval.py sha256:{content_sha256(STOCK)[:12]}"


@pytest.mark.parametrize("change", ["one byte", "custom file", "renamed stock"])
def test_the_stock_harness_is_recognised_by_content_never_by_name(change):
    task = load_problem(VECTORADD).task
    if change == "one byte":  # still called eval.py, but not the stock text: it keeps running, unprotected
        plan = choose_harness(payload_for(task, **{"eval.py": STOCK.replace("exit(113)", "exit(0)")}))
        assert not plan.protected and "is not a known stock reference-kernels harness" in plan.info["reason"]
        assert plan.payload.sources["eval.py"] != OUR_EVAL
    elif change == "custom file":  # grayscale_py ships its own eval.py
        grayscale = load_problem(FIXTURE / "pmpp_v2" / "grayscale_py").task
        plan = choose_harness(payload_for(grayscale))
        assert not plan.protected and plan.info["kind"] == "problem"
        assert "⚠ unprotected" in render_text(long_report({"runs": {"test": {"harness": plan.info}}}))
    else:  # the stock text under another name is the stock harness
        files = {**task.files, "main.py": task.files["eval.py"]}
        del files["eval.py"]
        renamed = task.model_copy(update={"files": files, "config": task.config.model_copy(update={"main": "main.py"})})
        plan = choose_harness(payload_for(renamed))
        assert plan.protected and plan.payload.sources["main.py"] == OUR_EVAL


def test_a_problem_without_the_standard_shape_keeps_its_harness():
    task = load_problem(VECTORADD).task
    files = {name: content for name, content in task.files.items() if name != "reference.py"}
    plan = choose_harness(payload_for(task.model_copy(update={"files": files})))
    assert not plan.protected and "it has no reference.py" in plan.info["reason"]


def test_our_own_bundled_harness_is_protected_and_a_foreign_cuda_harness_is_not():
    bundled = load_problem(PROBLEMS_ROOT / "examples" / "vectoradd_py").task
    assert choose_harness(payload_for(bundled, harness="problem")).info["kind"] == "kernelbot"
    foreign_cuda = load_problem(FIXTURE / "pmpp_v2" / "matmul_cu").task
    plan = choose_harness(build_payload(foreign_cuda, "x", run_id="r", gpu="H100", mode="test", secret=False,
                                        seed=None))
    assert not plan.protected and plan.info["version"].startswith("problem eval.cu sha256:")


def test_task_yml_may_ask_for_either_harness_and_a_wrong_value_names_the_field(tmp_path):
    checkout = Path(shutil.copytree(FIXTURE, tmp_path / "problems"))
    task_file = checkout / "pmpp_v2" / "vectoradd_py" / "task.yml"
    data = yaml.safe_load(task_file.read_text())
    for harness in ("kernelbot", "problem"):
        task_file.write_text(yaml.safe_dump({**data, "harness": harness}))
        assert load_problem(task_file.parent).task.harness == harness
    task_file.write_text(yaml.safe_dump({**data, "harness": "ours"}))
    with pytest.raises(TaskFileError, match="harness: must be one of problem, kernelbot"):
        load_problem(task_file.parent)


def sync(checkout: Path, boards=None, force=False):
    return plan_sync(checkout, boards or {}, problem_set="pmpp_v2", force=force, visibility="public",
                     now=datetime(2026, 1, 1, tzinfo=UTC), new_secret=lambda: 7, event_tag="t")


def test_the_competition_file_chooses_per_competition_and_per_problem(tmp_path):
    checkout = Path(shutil.copytree(FIXTURE, tmp_path / "problems"))
    competition = checkout / "pmpp_v2.yaml"
    data = yaml.safe_load(competition.read_text())
    data["harness"] = "problem"  # the whole competition...
    data["problems"][0]["harness"] = "kernelbot"  # ...except vectoradd, which gets ours
    competition.write_text(yaml.safe_dump(data))
    events = {event.name: event for event in sync(checkout).events}
    assert events["vectoradd_v2"].task.harness == "kernelbot"
    assert events["grayscale_v2"].task.harness == "problem"
    assert events["matmul_cu_v2"].task.harness == "problem"

    data["harness"] = "someone else's"
    competition.write_text(yaml.safe_dump(data))
    with pytest.raises(CompetitionFileError, match="harness: must be one of problem, kernelbot"):
        load_competition(competition)


def test_switching_the_harness_of_a_board_needs_force(tmp_path):

    checkout = Path(shutil.copytree(FIXTURE, tmp_path / "problems"))
    created = {e.name: Board(e.name, e.task.model_dump(mode="json"), e.description, e.templates, e.deadline)
               for e in sync(checkout).events}
    competition = checkout / "pmpp_v2.yaml"
    data = yaml.safe_load(competition.read_text())
    competition.write_text(yaml.safe_dump({**data, "harness": "problem"}))
    held = sync(checkout, created)
    assert {"name": "vectoradd_v2", "reason": "significant task changes require --force"} in held.skipped
    assert "vectoradd_v2" in sync(checkout, created, force=True).updated
    # where the field cannot change what judges the board (CUDA here), it is no change at all
    assert {"name": "matmul_cu_v2", "reason": "no changes"} in held.skipped


def test_boards_stored_before_the_new_default_need_force_only_where_the_harness_changes(tmp_path):
    """A board stored with the old default (`problem`) and a task.yml that does not say: a stock eval.py now gets
    ours, which changes its judge (force); our own eval.py was ours already (no change)."""

    checkout = Path(shutil.copytree(FIXTURE, tmp_path / "problems"))
    old = {e.name: Board(e.name, {**e.task.model_dump(mode="json"), "harness": "problem"}, e.description,
                         e.templates, e.deadline) for e in sync(checkout).events}
    held = sync(checkout, old)
    assert {"name": "vectoradd_v2", "reason": "significant task changes require --force"} in held.skipped
    assert {"name": "matmul_cu_v2", "reason": "no changes"} in held.skipped

    examples = PROBLEMS_ROOT.parent / "problems"
    bundled = plan_sync(examples, {}, problem_set="examples", force=False, visibility="public",
                        now=datetime(2026, 1, 1, tzinfo=UTC), new_secret=lambda: 7, event_tag="t").events
    old = {e.name: Board(e.name, {**e.task.model_dump(mode="json"), "harness": "problem"}, e.description,
                         e.templates, e.deadline) for e in bundled}
    again = plan_sync(examples, old, problem_set="examples", force=False, visibility="public",
                      now=datetime(2026, 1, 1, tzinfo=UTC), new_secret=lambda: 7, event_tag="t")
    assert again.events == [] and {item["reason"] for item in again.skipped} == {"no changes"}


def test_the_long_report_names_a_protected_harness():
    info = choose_harness(payload_for(load_problem(VECTORADD).task)).info
    text = render_text(long_report({"system": {"gpu": "cpu"}, "runs": {"test": {"harness": info}}}))
    assert "* Harness: `kernelbot-examples" in text and "+reference-kernels` (protected:" in text


def test_kernelbot_harness_identify_says_which_files_are_stock():
    from typer.testing import CliRunner


    custom = FIXTURE / "pmpp_v2" / "grayscale_py" / "eval.py"
    done = CliRunner().invoke(app, ["harness", "identify", str(FIXTURE / "pmpp_v2" / "eval.py"), str(custom)])
    assert done.exit_code == 0, done.output
    stock_line, custom_line = done.output.splitlines()
    assert stock_line.startswith(content_sha256(STOCK)) and stock_line.endswith("stock: pmpp_v2 eval.py (KernelBot "
                                                                                  "test rewrite)")
    assert custom_line.endswith("is not a known stock reference-kernels harness: the problem keeps it, unprotected")


def test_a_runner_host_may_add_reviewed_stock_versions(monkeypatch):
    task = load_problem(VECTORADD).task
    variant = STOCK.replace("# warm-up", "# warm-up (a reviewed upstream revision)")
    assert not choose_harness(payload_for(task, **{"eval.py": variant})).protected
    monkeypatch.setenv("KB_STOCK_EVAL_SHA256", f"not-a-hash, {content_sha256(variant).upper()}")
    plan = choose_harness(payload_for(task, **{"eval.py": variant}))
    assert plan.protected and plan.info["replaced"] == "added on this host (KB_STOCK_EVAL_SHA256)"
