"""Pure parts of the runner: result parsing, truncation, environment scrubbing, stage planning, system info, and
the example harness's seed mixing / case parsing / statistics."""

from __future__ import annotations

import importlib.util
import math
import sys

import pytest

from problems import PROBLEMS_ROOT
from runner.confinement.environment import scrubbed_environment
from runner.host.sysinfo import collect_system_info, cpu_model
from runner.stages.stage import plan_stages
from runner.task.protocol import TAMPERING_ERROR, judge_stage, parse_result_lines, parse_sample_lines, truncate_output
from schemas.contracts import RunPayload


def load_example_harness(file_name: str = "harness_measure.py"):
    """One file of the example harness as a module, its sibling files importable as in a run directory."""
    examples = str(PROBLEMS_ROOT / "examples")
    spec = importlib.util.spec_from_file_location(f"examples_{file_name[:-3]}", PROBLEMS_ROOT / "examples" / file_name)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, examples)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(examples)
    return module


def test_result_lines_split_at_the_first_colon():
    result, tampered = parse_result_lines("a: 1\n\nb.spec: size: 3; seed: 4\nbare line\n  c :  x y  \n")
    assert result == {"a": "1", "b.spec": "size: 3; seed: 4", "bare line": "", "c": "x y"}
    assert not tampered


def test_duplicate_key_or_line_after_check_is_tampering():
    verdict = judge_stage("test-count: 1\ntest.0.status: pass\ncheck: pass\ncheck: pass\n", "test", 1)
    assert not verdict.passed and verdict.result["error"] == TAMPERING_ERROR
    verdict = judge_stage("a: first\na: second\ntest-count: 0\ncheck: pass\n", "test", 0)
    assert not verdict.passed and verdict.result["a"] == "first" and verdict.result["check"] == "pass"
    verdict = judge_stage("test-count: 0\ncheck: pass\nextra: 1\n", "test", 0)
    assert not verdict.passed and verdict.result["extra"] == "1"


def test_passing_requires_a_result_consistent_with_the_case_file():
    good_test = "test-count: 2\ntest.0.status: pass\ntest.1.status: pass\ncheck: pass\n"
    assert judge_stage(good_test, "test", 2).passed
    assert not judge_stage(good_test, "test", 3).passed
    assert not judge_stage("check: pass\n", "test", 1).passed
    assert not judge_stage("test-count: 1\ntest.0.status: fail\ncheck: pass\n", "test", 1).passed
    assert not judge_stage("test-count: 1\ntest.0.status: pass\ncheck: fail\n", "test", 1).passed
    bench = "benchmark-count: 1\nbenchmark.0.spec: s\nbenchmark.0.mean: 5.0\ncheck: pass\n"
    assert judge_stage(bench, "leaderboard", 1).passed
    assert judge_stage(bench, "leaderboard", None).passed
    assert not judge_stage("benchmark-count: 1\nbenchmark.0.spec: s\ncheck: pass\n", "benchmark", 1).passed


def test_truncation_keeps_whole_lines_and_counts_the_rest():
    assert truncate_output("short\ntext") == "short\ntext"
    lines = [f"line {i:05d}" for i in range(5000)]  # 11 chars + newline each
    text = truncate_output("\n".join(lines))
    kept = text.split("\n")[:-1]
    assert len(text) <= 16_384 and kept == lines[: len(kept)]
    assert text.endswith(f"[...] {5000 - len(kept)} lines omitted")
    def used(count: int) -> int:
        return sum(len(line) + 1 for line in lines[:count]) + 100

    assert used(len(kept)) <= 16_384 < used(len(kept) + 1)
    assert truncate_output("a\nb", extra_lines=7) == "a\nb\n[...] 7 lines omitted"


def test_sample_lines_ignore_junk():
    text = '{"key": "benchmark.0", "samples_ns": [1, 2]}\nnot json\n[1]\n{"key": "benchmark.0", "samples_ns": []}\n'
    assert parse_sample_lines(text) == {"benchmark.0": {"samples_ns": [1, 2]}}


def test_environment_is_scrubbed_of_secrets():
    base = {
        "PATH": "/usr/bin", "HOME": "/root", "LANG": "C.UTF-8", "CUDA_VISIBLE_DEVICES": "0",
        "KB_DATABASE_URL": "postgres://u:p@db/kb", "KB_ANYTHING": "x", "GITHUB_TOKEN": "ghp_x", "MY_API_KEY": "k",
        "DISCORD_BOT_TOKEN": "t", "PYTHONPATH": "/evil", "SUBMISSION_PAYLOAD": "eJw=", "POPCORN_SEED": "5",
        "UPSTREAM": "https://user:pass@example.invalid", "AWS_SECRET_ACCESS_KEY": "s",
    }
    assert scrubbed_environment(base) == {"PATH": "/usr/bin", "HOME": "/root", "LANG": "C.UTF-8",
                                          "CUDA_VISIBLE_DEVICES": "0"}


def payload(mode: str, ranking_by: str = "last") -> RunPayload:
    return RunPayload(run_id="r", gpu="cpu", lang="py", mode=mode, ranking_by=ranking_by, main="eval.py",
                      tests=[{"n": 1}, {"n": 2}], benchmarks=[{"n": 3}, {"n": 4}, {"n": 5}],
                      test_timeout=11, benchmark_timeout=22, ranked_timeout=33)


def test_stage_plans_follow_the_mode_table():
    assert [(p.key, p.harness_stage, p.timeout) for p in plan_stages(payload("test"))] == [("test", "test", 11)]
    bench = plan_stages(payload("benchmark"))
    assert [(p.key, p.cases) for p in bench] == [("benchmark", [{"n": 5}])]  # ranking_by last: only the last
    assert plan_stages(payload("benchmark", "geom"))[0].cases == [{"n": 3}, {"n": 4}, {"n": 5}]
    for mode in ("leaderboard", "private"):
        plans = plan_stages(payload(mode))
        assert [(p.key, p.harness_stage, p.timeout) for p in plans] == [
            ("test", "test", 11), ("benchmark", "benchmark", 22), ("leaderboard", "leaderboard", 33)]
        assert plans[2].cases == [{"n": 5}]
    assert [p.key for p in plan_stages(payload("profile"))] == ["profile.0", "profile.1", "profile.2"]


def test_system_info_without_gpu(tmp_path):
    info = collect_system_info()
    assert info.runtime in ("CPU", "CUDA", "ROCm") and info.hostname and info.platform and info.cpu
    if info.runtime == "CPU":
        assert info.device_count == 0 and info.gpu == "cpu"
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: unknown\n\nprocessor\t: 1\n")
    assert cpu_model(str(cpuinfo)) == "AuthenticAMD"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Example CPU @ 3GHz\n")
    assert cpu_model(str(cpuinfo)) == "Example CPU @ 3GHz"


def test_example_harness_mixes_the_secret_one_way():
    harness = load_example_harness()
    assert harness.mix_seed(None, 4242, 0) == 4242 and harness.mix_seed(None, 4242, 2) == 4268
    mixed = harness.mix_seed(905057207, 4242, 0)
    assert 0 <= mixed < 2**31 and mixed == harness.mix_seed(905057207, 4242, 0)
    assert len({harness.mix_seed(905057207, 4242, i) for i in range(100)}) == 100
    assert mixed != harness.mix_seed(905057208, 4242, 0)
    cantor = 4242 + (4242 + 905057207) * (4242 + 905057207 + 1) // 2
    assert mixed != cantor


def test_example_harness_parses_case_lines():
    harness = load_example_harness("eval.py")
    assert harness.parse_case_line("size: 127; seed: -42; m: [96, 128]; dist: normal_2\n") == {
        "size": 127, "seed": -42, "m": [96, 128], "dist": "normal_2"}
    for bad in ("size 127", "size: 1.5", "size: 1; ", "x: a b"):
        with pytest.raises(ValueError):
            harness.parse_case_line(bad)


def test_example_harness_statistics_follow_the_formulas():
    summarize = load_example_harness().summarize
    stats = summarize([4, 1, 3, 2])
    assert (stats["runs"], stats["mean"], stats["best"], stats["worst"], stats["median"]) == (4, 2.5, 1, 4, 2.5)
    assert stats["std"] == pytest.approx(math.sqrt(5 / 3)) and stats["err"] == pytest.approx(stats["std"] / 2)
    assert (stats["ci_low"], stats["ci_high"]) == (1, 4)  # n < 6: [min, max]
    samples = list(range(1, 101))
    stats = summarize(samples)
    j = max(1, math.floor(50 - 0.98 * 10))
    k = min(100, math.ceil(1 + 50 + 0.98 * 10))
    assert stats["median"] == 50.5 and (stats["ci_low"], stats["ci_high"]) == (j, k)
