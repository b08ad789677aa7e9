"""The long report of one run (docs/quickstart.md) as a list of parts, and the time format of
docs/quickstart.md "Reading a report". Pure.

Parts are kept apart from their rendering: an HTTP client gets them as markdown text
(services.core.presentation.reports.render_text), the Discord bot sends Logs as code blocks and Files as attachments.
Works on the FullResult shape as plain JSON (what the read model and the SSE stream hold), so every consumer can call it without
building contract objects.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

COMMAND_LIMIT = 1000
SYSTEM_FIELDS = (("GPU", "gpu"), ("CPU", "cpu"), ("Device count", "device_count"), ("Runtime", "runtime"),
                 ("Platform", "platform"), ("Torch", "torch"), ("Hostname", "hostname"))


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Log:
    header: str
    content: str


@dataclass(frozen=True)
class Link:
    title: str
    text: str
    url: str


@dataclass(frozen=True)
class File:
    name: str
    content: bytes


Part = Text | Log | Link | File


def format_time(ns: float | str | None, err: float | str | None = None) -> str:
    """A duration given in ns, in the unit and precision of docs/quickstart.md (`4.00 ± 0.001 µs`)."""
    if ns is None or ns == "":
        return "–"
    value, error = float(ns), float(err or 0.0)
    scale, unit = (1e6, "ms") if value > 2_000_000 else (1e3, "µs") if value > 2_000 else (1.0, "ns")
    value, error = value / scale, error / scale
    if value < 1:
        shown, shown_err = f"{value}", f"{error}"
    else:
        digits = 2 if value < 10 else 1 if value < 100 else 0
        shown, shown_err = f"{value:.{digits}f}", f"{error:.{digits + 1}f}"
    return f"{shown} ± {shown_err} {unit}" if error else f"{shown} {unit}"


def _seconds(value: Any) -> str:
    return f"{float(value or 0.0):.2f}"


def _command(command: str) -> str:
    if len(command) > COMMAND_LIMIT:
        command = command[: COMMAND_LIMIT - 6] + " [...]"
    return command


def fenced(text: str) -> str:
    """A code block whose fence is longer than any backtick run inside, so program output cannot close it."""
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _value(value: Any, unit: str = "") -> str:
    return "–" if value in (None, "") else f"{value}{unit}"


def fingerprint_lines(fingerprint: dict[str, Any]) -> list[str]:
    """The hardware fingerprint (docs/authoring.md) of each GPU and of the CPU, one line each."""
    lines = []
    for gpu in fingerprint.get("gpus") or []:
        lines.append(f"* GPU {gpu.get('index', 0)}: `{gpu.get('name', '')}`, driver {_value(gpu.get('driver'))}, "
                     f"CUDA/ROCm {_value(gpu.get('runtime_version'))}, SM clock {_value(gpu.get('sm_clock_mhz'))}"
                     f" MHz (max {_value(gpu.get('max_sm_clock_mhz'))}), power limit "
                     f"{_value(gpu.get('power_limit_w'), ' W')}, ECC {_value(gpu.get('ecc'))}")
    cpu = fingerprint.get("cpu") or {}
    if cpu.get("cores"):
        lines.append(f"* CPU cores: {cpu['cores']}, governor {_value(cpu.get('governor'))}, frequency "
                     f"{_value(cpu.get('frequency_mhz'), ' MHz')}")
    return lines


def system_info(system: dict[str, Any], harness: dict[str, Any] | None = None) -> Text:
    lines = ["Running on:"] + [f"* {label}: `{system.get(key, '')}`" for label, key in SYSTEM_FIELDS]
    if harness and harness.get("kind"):
        lines.append(harness_line(harness))
    return Text("\n".join(lines + fingerprint_lines(system.get("fingerprint") or {})))


def isolation_note(result: dict[str, Any]) -> list[Part]:
    """A run the runner could not fully isolate is marked: it ranks only on a platform in development mode."""
    level = result.get("isolation") or ""
    if level in ("", "full"):
        return []
    return [Text(f"⚠ Isolation: {level}. This runner confined the run by resource limits only, without a user and "
                 "namespaces of its own; such a run is ranked only on a platform in development mode.")]


def throttle_note(evaluation: dict[str, Any]) -> list[Part]:
    """A timed stage measured while a GPU slowed itself down is flagged: its times are not to be trusted."""
    telemetry = evaluation.get("telemetry") or {}
    if not telemetry.get("throttled"):
        return []
    reasons = ", ".join(telemetry.get("throttle_reasons") or []) or "unknown"
    return [Text(f"⚠ Measured while the GPU was throttling ({reasons}); these times may be slower than the "
                 "hardware allows.")]


def harness_line(harness: dict[str, Any]) -> str:
    """Which harness judged the run, as the runner decided it (runner/task/harness_choice.py); an unprotected one says
    so, because its timings and verdicts are only as good as the submission lets them be."""
    version = f"`{harness.get('version', '')}`"
    if harness.get("protected") == "true":
        return f"* Harness: {version} (protected: {harness.get('reason', '')})"
    return f"* Harness: {version} ⚠ unprotected: {harness.get('reason', '')}"


def _harness_of(runs: dict[str, Any]) -> dict[str, Any]:
    return next((stage.get("harness") or {} for stage in runs.values() if (stage.get("harness") or {}).get("kind")),
                {})


def _output_logs(run: dict[str, Any], prefix: str = "Program") -> list[Part]:
    return [Log(f"{prefix} {name}", run[name]) for name in ("stderr", "stdout") if run.get(name)]


def compile_failure(compilation: dict[str, Any]) -> list[Part]:
    if not compilation.get("nvcc_found", True):
        return [Text("# Compilation failed\nThe runner could not find the CUDA compiler (nvcc). This is a "
                     "misconfiguration of the runner, not a problem with your code; please tell the organisers.")]
    parts: list[Part] = [Text(f"# Compilation failed\nThe compilation command\n"
                              f"{fenced(_command(compilation.get('command', '')))}\n"
                              f"exited with code **{compilation.get('exit_code', 0)}**.")]
    parts.append(Log("Compiler stderr", compilation.get("stderr", "")))
    if compilation.get("stdout"):
        parts.append(Log("Compiler stdout", compilation["stdout"]))
    return parts


def crash(run: dict[str, Any]) -> list[Part]:
    if run.get("exit_code") == 114:
        ending = f"**timed out** after {_seconds(run.get('duration'))} seconds."
    else:
        ending = f"exited with error code **{run.get('exit_code')}** after {_seconds(run.get('duration'))} seconds."
    text = f"# Running failed\nThe command\n{fenced(_command(run.get('command', '')))}\n{ending}"
    return [Text(text), *_output_logs(run)]


def failure_parts(evaluation: dict[str, Any]) -> list[Part] | None:
    """The compile-failure or crash report of a stage, or None when the stage ran to a verdict."""
    compilation, run = evaluation.get("compilation"), evaluation.get("run")
    if compilation is not None and not compilation.get("success"):
        return compile_failure(compilation)
    if run is None:
        return [Text("# Running failed\nThe stage did not run.")]
    if not run.get("success"):
        return crash(run)
    return None


def _unescape(message: str) -> str:
    # harnesses escape newlines so one message stays on one result line
    return message.replace("\\n", "\n")


def _count(result: dict[str, str], key: str) -> int:
    try:
        return int(result.get(key, "0"))
    except ValueError:
        return 0


def test_log(result: dict[str, str]) -> tuple[str, int, int]:
    """The test log lines, and how many tests passed out of how many."""
    count, passed, lines = _count(result, "test-count"), 0, []
    if count == 0:
        return "❗ Could not find any test cases", 0, 0
    for i in range(count):
        spec = result.get(f"test.{i}.spec", "")
        if result.get(f"test.{i}.status") == "pass":
            passed += 1
            lines.append(f"✅ {spec}")
            if result.get(f"test.{i}.message"):
                lines.append(f"> {_unescape(result[f'test.{i}.message'])}")
        else:
            lines.append(f"❌ {spec}")
            lines.append(f"> {_unescape(result.get(f'test.{i}.error', 'no error message'))}")
    return "\n".join(lines), passed, count


def benchmark_log(result: dict[str, str]) -> str:
    count = _count(result, "benchmark-count")
    if count == 0:
        return "❗ Could not find any benchmarks"
    blocks = []
    for i in range(count):
        key = f"benchmark.{i}."
        spec = result.get(key + "spec", "")
        if result.get(key + "status") == "fail" or key + "mean" not in result:
            error = _unescape(result.get(key + "error", "no statistics reported"))
            blocks.append(f"❌ {spec} failed testing:\n\n{error}\n")
            continue
        lines = [spec, f" ⏱ {format_time(result[key + 'mean'], result.get(key + 'err'))}",
                 f" ⚡ {format_time(result.get(key + 'best'))} 🐌 {format_time(result.get(key + 'worst'))}"]
        if key + "median" in result:
            lines.append(f" median {format_time(result[key + 'median'])} "
                         f"[{format_time(result.get(key + 'ci_low'))}, {format_time(result.get(key + 'ci_high'))}]")
        if result.get(key + "unstable") == "true":
            lines.append(" ⚠ unstable")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def _decode_report(text: str) -> str:
    try:
        raw = base64.b64decode(text.replace("*", "/").encode("ascii"), validate=True)
        return raw.decode("utf-8", errors="replace")
    except (binascii.Error, ValueError):
        return text


def profile_parts(evaluation: dict[str, Any]) -> list[Part]:
    result = evaluation["run"].get("result", {})
    parts: list[Part] = []
    specs = []
    for i in range(_count(result, "benchmark-count")):
        spec = result.get(f"benchmark.{i}.spec", "")
        specs.append(spec)
        report = _decode_report(result.get(f"benchmark.{i}.report", ""))
        parts.append(Log(f"Profiling {spec}", "\n".join("  " + line for line in report.splitlines())))
    profile = evaluation.get("profile") or {}
    if profile.get("download_url"):
        parts.append(Link(f"{profile.get('profiler', 'Profiler')} profiling output", "Download from GitHub",
                          profile["download_url"]))
    if profile.get("trace"):
        label = (specs[0] if specs else "").replace(": ", "=").replace("; ", "_")
        try:
            parts.append(File(f"profile-{label}.zip", base64.b64decode(profile["trace"])))
        except (binascii.Error, ValueError):
            pass
    return parts


def _profile_stages(runs: dict[str, Any]) -> list[str]:
    def order(stage: str) -> tuple[int, str]:
        index = stage.removeprefix("profile.")
        return (int(index), "") if index.isdigit() else (1 << 30, index)

    return sorted((stage for stage in runs if stage.startswith("profile.")), key=order)


def long_report(result: dict[str, Any], extra: str = "") -> list[Part]:
    """The parts of docs/quickstart.md "Reading a report", in order; a compile failure, a crash or failed tests end the
    report."""
    runs: dict[str, Any] = result.get("runs", {})
    parts: list[Part] = [Text(extra)] if extra else []
    parts.append(system_info(result.get("system") or {}, _harness_of(runs)))
    parts.extend(isolation_note(result))
    if "test" in runs:
        failed = failure_parts(runs["test"])
        if failed:
            return parts + failed
        run = runs["test"]["run"]
        log, passed, count = test_log(run.get("result", {}))
        if not run.get("passed"):
            parts.append(Text(f"# Testing failed\nThe command\n{fenced(_command(run.get('command', '')))}\n"
                              f"ran successfully in {_seconds(run.get('duration'))} seconds, but did not pass all "
                              f"tests."))
            return parts + [Log("Test log", log), *_output_logs(run)]
        parts.append(Log(f"✅ Passed {passed}/{count} tests", log))
    for stage, header in (("benchmark", "Benchmarks"), *((s, None) for s in _profile_stages(runs)),
                          ("leaderboard", "Ranked Benchmark")):
        if stage not in runs:
            continue
        failed = failure_parts(runs[stage])
        if failed:
            return parts + failed
        if header is None:
            parts.extend(profile_parts(runs[stage]))
        else:
            parts.append(Log(header, benchmark_log(runs[stage]["run"].get("result", {}))))
            parts.extend(throttle_note(runs[stage]))
    if len(runs) == 1:
        only = next(iter(runs.values()))
        parts.extend(_output_logs(only.get("run") or {}))
    return parts
