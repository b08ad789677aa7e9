"""The floor under every score: the rules that hold a score for review, the peaks and roofline floors they read, and
the task.yml declaration they come from."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.task.taskfile import TaskFileError, load_problem
from schemas.contracts import RooflineCase
from schemas.events import PlannedRun
from services.core.rules import gpu_peaks
from services.dispatcher import planning
from services.dispatcher.catalogue import CatalogueError, build_catalogue
from services.scorer.floor import FloorRules, Measured, hold, per_case_median
from tests.support.platform import identity_board

RULES = FloorRules(best_fraction=0.0, sibling_ratio=0.05)


def measured(means: list[float], floors: list[float] | None = None, best: float | None = None,
             reference: list[float] | None = None, score: float | None = None) -> Measured:
    return Measured("H100", score if score is not None else min(means) / 1e9, means, floors or [], best, reference)


def test_a_case_below_its_roofline_floor_is_held_with_the_figures():
    found = hold(measured([150_000.0, 80_000.0], floors=[100_000.0, 100_000.0]), RULES)
    assert found is not None and found.rule == "roofline"
    assert found.reason == "benchmark 1 took 80 µs on H100, below its roofline floor of 100 µs"
    # within the slack (rounded datasheets, timer granularity) it ranks
    assert hold(measured([150_000.0, 95_000.0], floors=[100_000.0, 100_000.0]), RULES) is None


def test_a_score_below_the_operators_fraction_of_the_best_is_held_and_off_by_default():
    fast = measured([400.0], best=10e-6, score=400e-9)
    assert hold(fast, RULES) is None  # 0: the rule is off
    found = hold(fast, FloorRules(best_fraction=0.1))
    assert found is not None and found.rule == "best-fraction"
    assert found.reason == "score 400 ns on H100 is below 0.1 of the board's best, 10 µs"
    assert hold(measured([2_000.0], best=10e-6, score=2e-6), FloorRules(best_fraction=0.1)) is None


def test_one_case_far_ahead_of_the_boards_median_while_its_siblings_are_not_is_held():
    best = [1_000.0, 4_000.0, 16_000.0]
    underflow = hold(measured([1_000.0, 4_000.0, 160.0], reference=best), RULES)  # one shape made 100x faster
    assert underflow is not None and underflow.rule == "sibling"
    assert underflow.reason.startswith("benchmark 2 (160 ns) on H100 is over 20 times faster than against the "
                                       "board's median on its other cases")
    # honest: uniformly faster, or unevenly within the ratio
    assert hold(measured([400.0, 1_500.0, 7_000.0], reference=best), RULES) is None
    assert hold(measured([900.0, 3_000.0, 1_600.0], reference=best), RULES) is None
    assert hold(measured([1_000.0, 4_000.0, 160.0], reference=best), FloorRules(sibling_ratio=0)) is None


def test_a_skewed_best_entry_does_not_hold_a_legitimate_one_and_the_underflow_is_still_held():
    """The reference is the board's per-case median over its ranked entries, not its best entry: a best entry with one
    case far faster than the rest (cleared by an admin, or honest) makes a legitimate entry measured against it look
    skewed the other way, while the median of the board does not move."""
    honest, fast = [1_000.0, 4_000.0, 16_000.0], [400.0, 1_500.0, 7_000.0]
    skewed_best = [1_000.0, 4_000.0, 160.0]
    board = per_case_median([skewed_best, fast, honest], 3)
    assert board == [1_000.0, 4_000.0, 7_000.0]
    legitimate = [800.0, 3_000.0, 12_000.0]  # uniformly a little faster than the honest entry
    against_best = hold(measured(legitimate, reference=skewed_best), RULES)
    assert against_best is not None and against_best.rule == "sibling"  # what comparing with the best entry did
    assert hold(measured(legitimate, reference=board), RULES) is None
    underflow = hold(measured([1_000.0, 4_000.0, 100.0], reference=board), RULES)
    assert underflow is not None and underflow.rule == "sibling" and underflow.reason.startswith("benchmark 2 ")


def test_the_per_case_median_counts_only_entries_recorded_for_the_same_cases():
    assert per_case_median([], 2) is None and per_case_median([None, [1.0, 2.0, 3.0], [0.0, 5.0]], 2) is None
    assert per_case_median([[1.0, 10.0], None, [3.0, 30.0], [1.0]], 2) == [2.0, 20.0]


def test_without_a_best_entry_the_raw_times_are_compared_with_the_ratio_squared():
    # honest cases of different sizes differ by hundreds of times: vectoradd's sizes 1024..16384
    assert hold(measured([5_000.0, 8_000.0, 25_000.0, 120_000.0, 480_000.0]), RULES) is None
    found = hold(measured([0.5, 8_000.0, 25_000.0, 120_000.0]), RULES)
    assert found is not None and found.rule == "sibling" and "than its other cases" in found.reason


def test_a_declared_roofline_replaces_the_sibling_rule():
    # the declaration says what each case costs: a legitimately tiny case is judged by its own floor
    assert hold(measured([10.0, 8_000.0, 25_000.0], floors=[5.0, 1_000.0, 1_000.0]), RULES) is None


def test_peaks_and_floors_follow_the_datasheets_and_the_catalogue():
    h100 = gpu_peaks.peak_of("H100")
    assert h100 is not None and h100.bandwidth_gbs == 3350
    assert gpu_peaks.peak_of("mi300x8") == gpu_peaks.peak_of("MI300")  # a catalogue name for the device
    assert gpu_peaks.peak_of("cpu") is None
    case = RooflineCase(bytes=3_350_000_000, flops=989_500_000_000_000, precision="fp16")
    assert gpu_peaks.case_floor_ns(case, h100) == pytest.approx(1e9)  # 1 s either way
    assert gpu_peaks.case_floor_ns(case, h100, devices=2) == pytest.approx(0.5e9)
    unknown_format = RooflineCase(flops=1_979_000_000_000, precision="fp4")  # H100 has no FP4: its fastest peak
    assert gpu_peaks.case_floor_ns(unknown_format, h100) == pytest.approx(1e6)
    for name in ("T4", "L4", "A100", "H100", "B200", "MI250", "MI300", "MI355X"):
        assert gpu_peaks.DEVICES[name].bandwidth_gbs > 0


def test_a_catalogue_entry_may_state_its_own_peak_and_a_bad_one_is_refused():
    source = '{"gpus": {"X1": {"backend": "null", "peak": {"bandwidth_gbs": 100, "tflops": {"fp32": 1}}}}}'
    catalogue = build_catalogue(source, {}, [])
    peak = catalogue.entry("X1").peak
    assert peak is not None and gpu_peaks.peak_of("X1", {"X1": peak}) == peak
    with pytest.raises(CatalogueError, match="bandwidth_gbs"):
        build_catalogue('{"gpus": {"X1": {"backend": "null", "peak": {"bandwidth_gbs": 0, "tflops": {"a": 1}}}}}',
                        {}, [])


def test_planning_gives_the_ranked_public_run_its_floors():
    board = identity_board("b", ["H100"])
    task = board.task.model_copy(update={"roofline": [RooflineCase(bytes=335_000_000), RooflineCase(bytes=670)]})
    runs = planning.with_floors(planning.plan_runs(1, "leaderboard", ["H100", "cpu"]), task, {})
    floors = {(run.gpu, run.secret): run.floor_ns for run in runs}
    assert floors[("H100", False)] == [pytest.approx(100_000.0), pytest.approx(0.2)]
    assert floors[("H100", True)] == [] and floors[("cpu", False)] == []  # the secret run gates; the CPU has no peak
    assert planning.with_floors([PlannedRun(run_id="r", gpu="H100", mode="benchmark")], task, {})[0].floor_ns == []


def _task_file(tmp_path: Path, roofline: str) -> Path:
    directory = tmp_path / "problems" / "p"
    directory.mkdir(parents=True)
    (directory / "sub.py").write_text("")
    (directory / "task.yml").write_text(
        "lang: py\ndescription: d\nconfig: {main: sub.py}\nfiles: [{name: submission.py, source: '@SUBMISSION@'}, "
        "{name: sub.py, source: sub.py}]\n"
        "benchmarks:\n  - {size: 1}\n  - {size: 2}\n" + roofline)
    return directory


def test_task_yml_declares_the_roofline_per_benchmark(tmp_path):
    problem = load_problem(_task_file(tmp_path, "roofline:\n  - {bytes: 8}\n  - {bytes: 16, flops: 4, "
                                                "precision: bf16}\n"))
    assert problem.task.roofline == [RooflineCase(bytes=8), RooflineCase(bytes=16, flops=4, precision="bf16")]


@pytest.mark.parametrize(("roofline", "message"), [
    ("roofline:\n  - {bytes: 8}\n", "roofline: needs one entry per benchmark (2), got 1"),
    ("roofline:\n  - {bytes: 8}\n  - {bytes: -1}\n", "roofline[1].bytes: must be >= 0, got -1"),
    ("roofline:\n  - {bytes: 8}\n  - {flops: 0}\n", "roofline[1]: declares neither bytes nor flops above 0"),
    ("roofline:\n  - {bytes: 8}\n  - {bytes: 1, precision: fp12}\n", "roofline[1].precision: must be one of"),
    ("roofline:\n  - {bytes: 8}\n  - {bytes: 1, time: 3}\n", "roofline[1].time: unknown key"),
    ("roofline:\n  - {bytes: 8}\n  - {bytes: '1'}\n", "roofline[1].bytes: must be an integer"),
])
def test_a_bad_roofline_declaration_names_the_field(tmp_path, roofline, message):
    with pytest.raises(TaskFileError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        load_problem(_task_file(tmp_path, roofline))
