"""One line per conformance check and the summary line. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

STATUSES = ("pass", "fail", "skip")


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: str  # pass | fail | skip
    detail: str = ""
    figures: dict[str, float] = field(default_factory=dict)  # measurements worth keeping (timing noise)

    def line(self) -> str:
        text = f"{self.status.upper():4} {self.name}"
        return f"{text}: {self.detail}" if self.detail else text


def passed(name: str, detail: str = "", **figures: float) -> CheckResult:
    return CheckResult(name, "pass", detail, figures)


def failed(name: str, detail: str, **figures: float) -> CheckResult:
    return CheckResult(name, "fail", detail, figures)


def skipped(name: str, reason: str) -> CheckResult:
    return CheckResult(name, "skip", reason)


def summary_line(results: list[CheckResult], host: str) -> str:
    counts = {status: sum(result.status == status for result in results) for status in STATUSES}
    return f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped on {host}"
