"""The reports of docs/quickstart.md over real runner results (tests/fixtures/run_results.json was produced by running
the runner on the bundled vectoradd_py problem and the CUDA example; see the test names) and small built ones."""

from __future__ import annotations

import base64
import itertools
import json
import re
from pathlib import Path

import pytest

from services.core.presentation import reports
from services.core.presentation.longreport import File, Link, Log, Text, long_report

RESULTS = json.loads((Path(__file__).parents[1] / "fixtures" / "run_results.json").read_text())


def public(name: str, mode: str = "test") -> str:
    return reports.report("cpu", "local", mode, secret=False, result=RESULTS[name])


def test_passed_tests_show_system_info_and_the_test_log():
    text = public("test_pass")
    assert text.startswith("**cpu on local ✅ success**\n> ✅ Testing successful\n\nRunning on:\n")
    for line in ("* GPU: `cpu`", "* CPU: `AMD EPYC`", "* Device count: `0`", "* Runtime: `CPU`",
                 "* Torch: `2.13.0+cpu`", "* Hostname: `vm`", "* Platform: `Linux-"):
        assert line in text
    assert "## ✅ Passed 5/5 tests:\n```\n✅ size: 1; seed: 4242\n✅ size: 7; seed: 5236\n" in text


def test_failed_tests_show_the_command_the_duration_and_each_error_and_end_the_report():
    text = public("test_fail")
    assert "> ❌ Testing failed" in text
    assert "# Testing failed\nThe command\n```\npython3 eval.py test " in text
    assert "ran successfully in 2.03 seconds, but did not pass all tests." in text
    assert "## Test log:\n```\n❌ size: 1; seed: 4242\n> output shares storage with an input\n" in text
    assert "Passed" not in text and "Benchmarks" not in text


def test_a_crash_shows_the_exit_code_and_the_programs_stderr():
    text = public("crash")
    assert "> ❌ Running tests failed (internal error 1)" in text
    assert "# Running failed" in text and "exited with error code **1** after 2.23 seconds." in text
    assert "## Program stderr:\n```\nTraceback (most recent call last):" in text
    assert "ModuleNotFoundError: No module named 'nonexistent_module_xyz'\n```" in text
    assert "Program stdout" not in text  # empty output is not shown


def test_a_timeout_says_so_with_the_stage_timeout():
    text = public("timeout")
    assert "> ❌ Running tests failed (timeout)" in text
    assert "**timed out** after 1.00 seconds." in text
    assert "## Program stdout:\n```\nstarting\n```" in text


def test_a_compile_failure_shows_the_nvcc_command_exit_code_and_compiler_output():
    text = public("compile_failure")
    assert "> ❌ Compilation failed" in text
    assert "# Compilation failed\nThe compilation command\n```\nnvcc --std=c++20 -DNDEBUG" in text
    assert "-gencode=arch=compute_90,code=sm_90 -o eval.out\n```\nexited with code **1**." in text
    assert "## Compiler stderr:\n```\nsubmission.cu:1:10: fatal error: nonexistent_header.h" in text
    assert "Compiler stdout" not in text and "Running failed" not in text


def test_a_ranked_run_shows_tests_benchmarks_and_the_ranked_benchmark_from_its_statistics():
    text = public("leaderboard", "leaderboard")
    stats = RESULTS["leaderboard"]["runs"]["leaderboard"]["run"]["result"]
    assert (stats["benchmark.0.mean"], stats["benchmark.0.err"]) == ("4056.769", "87.27553921566104")
    assert "> ✅ Leaderboard run successful" in text
    assert text.index("## ✅ Passed 5/5 tests:") < text.index("## Benchmarks:") < text.index("## Ranked Benchmark:")
    ranked = text[text.index("## Ranked Benchmark:"):]
    assert ("size: 128; seed: 3141\n ⏱ 4.06 ± 0.087 µs\n ⚡ 3.01 µs 🐌 88.1 µs\n"
            " median 3.79 µs [3.75 µs, 3.81 µs]") in ranked


def test_a_secret_run_gets_only_its_status_lines():
    text = reports.report("cpu", "local", "private", secret=True, result=RESULTS["leaderboard"])
    assert text == ("**cpu on local (secret) ✅ success**\n> ✅ Testing successful\n> ✅ Benchmarking successful\n"
                    "> ✅ Leaderboard run successful")
    failed = reports.report("cpu", "local", "private", secret=True, result=RESULTS["crash"])
    assert failed == "**cpu on local (secret) ✅ success**\n> ❌ Running tests failed (internal error 1)"


def test_a_runner_failure_shows_only_its_error():
    text = reports.report("H100", "github", "test", secret=False, result={"success": False, "error": "lost job"})
    assert text == "**H100 on GitHub ❌ failure**\n> lost job"


@pytest.mark.parametrize(("ns", "err", "shown"), [
    (4000, 1, "4.00 ± 0.001 µs"),
    (12.3e6, 0.05e6, "12.3 ± 0.05 ms"),
    (1.5e9, 0, "1500 ms"),
    (1500, 0, "1500 ns"),
    (2001, None, "2.00 µs"),
    (0.5, 0, "0.5 ns"),
    (None, None, "–"),
])
def test_times_use_the_unit_and_precision_of_the_spec(ns, err, shown):
    assert reports.format_time(ns, err) == shown


def _bench(result: dict) -> dict:
    return {"system": {}, "success": True, "runs": {"benchmark": {"run": {
        "success": True, "passed": True, "command": "python3 eval.py benchmark x", "stdout": "", "stderr": "",
        "exit_code": 0, "duration": 1.0, "result": result}}}}


def test_benchmark_log_shows_failed_cases_unstable_flags_and_an_empty_list():
    result = {"benchmark-count": "2", "benchmark.0.spec": "size: 8", "benchmark.0.status": "fail",
              "benchmark.0.error": "mismatch\\nat index 3", "benchmark.1.spec": "size: 16", "benchmark.1.runs": "10",
              "benchmark.1.mean": "3000000", "benchmark.1.err": "0", "benchmark.1.best": "2500000",
              "benchmark.1.worst": "3500000", "benchmark.1.unstable": "true"}
    text = reports.render_text(long_report(_bench(result)))
    assert "❌ size: 8 failed testing:\n\nmismatch\nat index 3\n" in text
    assert "size: 16\n ⏱ 3.00 ms\n ⚡ 2.50 ms 🐌 3.50 ms\n ⚠ unstable" in text
    assert "❗ Could not find any benchmarks" in reports.render_text(long_report(_bench({})))


def test_a_missing_nvcc_blames_the_runner_not_the_user():
    result = {"success": True, "system": {}, "runs": {"test": {
        "compilation": {"nvcc_found": False, "success": False, "command": "", "exit_code": 0}, "run": None}}}
    text = reports.render_text(long_report(result))
    assert "misconfiguration of the runner, not a problem with your code" in text


def test_a_long_command_is_cut_and_program_output_cannot_close_the_code_block():
    run = {"success": False, "passed": False, "command": "x" * 1500, "exit_code": -11, "duration": 0.5,
           "stdout": "", "stderr": "```\n# I am a heading now\n````"}
    [text, stderr] = long_report({"system": {}, "runs": {"test": {"run": run}}})[1:]
    assert isinstance(text, Text) and "x" * 994 + " [...]\n" in text.text and "x" * 995 not in text.text
    assert "exited with error code **-11** after 0.50 seconds." in text.text
    rendered = reports.render_text([stderr])
    assert rendered.startswith("## Program stderr:\n`````\n```\n# I am a heading now\n````\n`````")


def test_profile_stages_decode_the_report_and_offer_the_trace():
    report = base64.b64encode("Kernel foo\n  Duration 3 us\n\xff".encode("latin-1")).decode()
    trace = base64.b64encode(b"PK\x03\x04zip").decode()
    result = {"success": True, "system": {}, "runs": {"profile.0": {
        "run": {"success": True, "passed": True, "exit_code": 0, "result": {
            "benchmark-count": "1", "benchmark.0.spec": "size: 128; seed: 1", "benchmark.0.report":
                report.replace("/", "*")}},
        "profile": {"profiler": "Nsight-Compute", "trace": trace, "download_url": "https://example.test/p"}}}}
    parts = long_report(result)
    assert Log("Profiling size: 128; seed: 1", "  Kernel foo\n    Duration 3 us\n  \ufffd") in parts
    assert Link("Nsight-Compute profiling output", "Download from GitHub", "https://example.test/p") in parts
    assert File("profile-size=128_seed=1.zip", b"PK\x03\x04zip") in parts
    assert "example.test" not in reports.render_text(parts)  # links and files are dropped from text


FENCE_LINE = re.compile(r"^`{3,}")


@pytest.mark.parametrize("limit", [2000, 300])
def test_chunks_stay_under_the_limit_and_every_piece_has_balanced_code_blocks(limit):
    crash = json.loads(json.dumps(RESULTS["crash"]))
    stderr = "".join(f"line {i}: {'e' * (i % 70)}\n" for i in range(400))
    crash["runs"]["test"]["run"]["stderr"] = stderr
    text = reports.report("cpu", "local", "test", secret=False, result=crash)
    pieces = reports.chunk(text, limit)
    assert len(pieces) > 1
    for piece in pieces:
        assert len(piece) <= limit
        fences = [line for line in piece.split("\n") if FENCE_LINE.match(line)]
        assert len(fences) % 2 == 0, piece
    # nothing lost: dropping the fences added at the cuts gives back the original lines in order
    original = [line for line in text.split("\n") if not FENCE_LINE.match(line)]
    rejoined = [line for piece in pieces for line in piece.split("\n") if not FENCE_LINE.match(line)]
    assert [line for line in rejoined if line] == [line for line in original if line]


def test_a_line_longer_than_a_piece_is_cut_hard_inside_its_code_block():
    text = "intro\n```\n" + "y" * 450 + "\n```\nafter"
    pieces = reports.chunk(text, 100)
    assert all(len(piece) <= 100 for piece in pieces)
    assert "".join(p.replace("```", "").replace("intro", "").replace("after", "").replace("\n", "")
                   for p in pieces) == "y" * 450
    assert pieces[-1].endswith("after")
    assert reports.chunk("short", 2000) == ["short"]


def test_no_limit_leaves_an_empty_code_block_or_an_unbalanced_piece():
    texts = [reports.report("cpu", "local", "leaderboard", secret=False, result=result) for result in RESULTS.values()]
    for text, limit in ((text, limit) for text in texts for limit in range(60, 700, 7)):
        pieces = reports.chunk(text, limit)
        for piece in pieces:
            lines = piece.split("\n")
            assert len(piece) <= limit
            assert sum(1 for line in lines if FENCE_LINE.match(line)) % 2 == 0, (limit, piece)
            assert not any(FENCE_LINE.match(a) and FENCE_LINE.match(b) for a, b in itertools.pairwise(lines)), (limit, piece)
