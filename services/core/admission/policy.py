"""Admission: the one place where a submission is judged acceptable. Pure; the gateway and the dispatcher use it.

Checks follow docs/http-api.md "Submitting" in its order; each failure carries the status and the exact detail a client
sees. The gateway judges with what its read model shows, for an immediate answer; the dispatcher judges again, with its
own count of accepted submissions, and its decision is the one that stands.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from schemas.contracts import ProfileOptions
from schemas.precheck_events import PrecheckFinding, PrecheckVerdict
from services.core.admission import precheck
from services.core.admission.refusal import Refusal, Refused, refuse
from services.core.admission.source_rules import check_directives, check_polite_file_name, check_streams

__all__ = ["Refusal", "Refused"]

MAX_SUBMISSION_BYTES = 1_000_000
MAX_FILE_NAME = 255
USER_MODES = ("test", "benchmark", "leaderboard", "profile")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")
EXTENSIONS_BY_LANG = {"py": (".py",), "cu": (".cu", ".cuh", ".cpp")}
RATE_CATEGORIES = ("test", "leaderboard")
RATE_WINDOW = timedelta(hours=1)
INTAKE_CLOSED = "The bot is currently not accepting any new submissions, please try again later."
BANNED = "You are banned from making submissions."
CLOSED_NEEDS_CLI = "Closed leaderboards only accept submissions via CLI"
NO_ACCESS = "You do not have access to this leaderboard"
TOO_LARGE = "Submission file is too large (limit: 1MB)."


@dataclass(frozen=True)
class LeaderboardView:
    """What admission needs to know about a leaderboard."""

    name: str
    gpus: tuple[str, ...]
    deadline: datetime
    lang: str
    visibility: str = "public"
    benchmarks: int = 0  # how many benchmark cases the task has (a profile request picks one by index)


@dataclass(frozen=True)
class Applicant:
    """Who submits: `via_cli` for a popcorn-cli identity, `invited` when a claimed invite covers the leaderboard."""

    banned: bool = False
    via_cli: bool = True
    invited: bool = False


@dataclass(frozen=True)
class RateLimit:
    """A leaderboard's limit for one category and the caller's accepted submissions in it (any age)."""

    max_per_hour: int
    accepted_at: tuple[datetime, ...] = ()


def rate_category(mode: str) -> str:
    return "leaderboard" if mode == "leaderboard" else "test"


def check_intake(accepting: bool) -> None:
    if not accepting:
        refuse(503, INTAKE_CLOSED)


def check_banned(applicant: Applicant) -> None:
    if applicant.banned:
        refuse(403, BANNED)


def check_mode(mode: str) -> str:
    mode = mode.lower()
    if mode == "private":
        refuse(400, "Submission mode 'private' is not supported for this endpoint")
    if mode not in USER_MODES:
        refuse(400, f"Invalid submission mode value: '{mode}'")
    return mode


def check_profile(board: LeaderboardView, mode: str, profile: ProfileOptions | None) -> None:
    """Capture options belong to profile mode, and a chosen benchmark case must exist."""
    if profile is None:
        return
    if mode != "profile":
        refuse(400, "Capture options are for profile submissions only")
    index = profile.benchmark_index
    if index is not None and index >= board.benchmarks:
        refuse(400, f"benchmark_index {index} is out of range: leaderboard '{board.name}' has "
                    f"{board.benchmarks} benchmark case{'' if board.benchmarks == 1 else 's'} (0 to "
                    f"{max(board.benchmarks - 1, 0)})")


def check_leaderboard(name: str, board: LeaderboardView | None) -> LeaderboardView:
    if board is None:
        refuse(404, f"Leaderboard `{name}` does not exist.")
    return board


def check_access(board: LeaderboardView, applicant: Applicant) -> None:
    """Step 5: a closed leaderboard takes CLI identities holding an invite to it; web identities never."""
    if board.visibility == "public":
        return
    if not applicant.via_cli:
        refuse(403, CLOSED_NEEDS_CLI)
    if not applicant.invited:
        refuse(403, NO_ACCESS)


def check_gpu(board: LeaderboardView, gpu: str) -> None:
    if not board.gpus:
        refuse(400, f"No available GPUs for leaderboard `{board.name}`.")
    if gpu not in board.gpus:
        supported = ", ".join(sorted(board.gpus))
        refuse(400, f"GPU type '{gpu}' is not supported for leaderboard '{board.name}'. Supported GPUs: {supported}")


def check_deadline(board: LeaderboardView, now: datetime) -> None:
    if now > board.deadline:
        refuse(400, f"The deadline to submit to {board.name} has passed.\nIt was {board.deadline} and today is {now}.")


def normalise_file_name(raw: str | None) -> str:
    name = os.path.basename((raw or "").replace("\\", "/")) or "submission.py"
    if len(name) > MAX_FILE_NAME:
        refuse(400, "File name is too long")
    if any(ord(ch) < 32 for ch in name):
        refuse(400, "File name contains control characters")
    return name


def check_file(board: LeaderboardView, file_name: str, content: bytes) -> str:
    """Steps 9-13 of docs/http-api.md "Submitting"; returns the decoded code."""
    lower = file_name.lower()
    if lower.endswith(ARCHIVE_SUFFIXES):
        refuse(400, "Archive submissions are not supported; submit a single .py, .cu, .cuh or .cpp file.")
    if not lower.endswith((".py", ".cu", ".cuh", ".cpp")):
        refuse(400, "Please provide a Python (.py) or CUDA (.cu / .cuh / .cpp) file")
    check_polite_file_name(file_name)
    accepted = EXTENSIONS_BY_LANG.get(board.lang, ())
    if accepted and not lower.endswith(accepted):
        refuse(400, f"Leaderboard '{board.name}' accepts {' / '.join(accepted)} files")
    if not content:
        refuse(400, "Empty file submitted. Please provide a file with code.")
    if len(content) > MAX_SUBMISSION_BYTES:
        refuse(413, TOO_LARGE)
    try:
        code = content.decode("utf-8")
    except UnicodeDecodeError:
        refuse(400, "Failed to decode submission file content as UTF-8.")
    if "\x00" in code:
        refuse(400, "Failed to decode submission file content as UTF-8.")
    return code


def check_rate_limit(limit: RateLimit | None, category: str, now: datetime) -> None:
    """Step 16: blocked when the accepted submissions of the last hour reach the maximum; retry once enough of
    them have left the window (with count == max, when the oldest leaves), rounded up, at least 1 s."""
    if limit is None:
        return
    counted = sorted(at for at in limit.accepted_at if at > now - RATE_WINDOW)
    count, most = len(counted), limit.max_per_hour
    if most <= 0:
        refuse(429, f"Rate limit exceeded: {count}/0 {category} submissions per hour. Submissions of this kind are "
                    "currently disabled for this leaderboard.")
    if count >= most:
        frees_at = counted[count - most] + RATE_WINDOW
        seconds = max(1, math.ceil((frees_at - now).total_seconds()))
        refuse(429, f"Rate limit exceeded: {count}/{most} {category} submissions per hour. "
                    f"Try again in {seconds}s.", retry_after_s=seconds)


@dataclass(frozen=True)
class Admitted:
    mode: str
    file_name: str
    code: str
    category: str


def judge(*, accepting: bool, applicant: Applicant, leaderboard_name: str, board: LeaderboardView | None,
          gpus: list[str], mode: str, file_name: str | None, content: bytes, now: datetime,
          rate_limit: RateLimit | None = None, deadline_applies: bool = True,
          profile: ProfileOptions | None = None) -> Admitted:
    """Every check of docs/http-api.md "Submitting" after authentication, in its order; raises the first refusal.

    `rate_limit` is the leaderboard's limit for this submission's category, None when there is none.
    """
    check_intake(accepting)
    check_banned(applicant)
    mode = check_mode(mode)
    board = check_leaderboard(leaderboard_name, board)
    check_access(board, applicant)
    if not gpus:
        refuse(400, "No GPU selected")
    for gpu in gpus:
        check_gpu(board, gpu)
    if deadline_applies:
        check_deadline(board, now)
    check_profile(board, mode, profile)
    name = normalise_file_name(file_name)
    code = check_file(board, name, content)
    check_streams(code)
    check_directives(code, leaderboard_name)
    category = rate_category(mode)
    check_rate_limit(rate_limit, category, now)
    return Admitted(mode=mode, file_name=name, code=code, category=category)


def admit(*, leaderboard_name: str, board: LeaderboardView | None, gpus: list[str], mode: str, file_name: str,
          code: str, now: datetime, accepting: bool = True, applicant: Applicant = Applicant(),
          rate_limit: RateLimit | None = None, deadline_applies: bool = True,
          profile: ProfileOptions | None = None) -> Refusal | None:
    """The dispatcher's authoritative decision on a received submission; None means accepted."""
    try:
        judge(accepting=accepting, applicant=applicant, leaderboard_name=leaderboard_name, board=board, gpus=gpus,
              mode=mode, file_name=file_name, content=code.encode("utf-8", errors="surrogatepass"), now=now,
              rate_limit=rate_limit, deadline_applies=deadline_applies, profile=profile)
    except Refused as refused:
        return refused.refusal
    return None


def read_source(code: str, file_name: str, mode: str) -> list[precheck.Finding]:
    """The source pre-check's findings (docs/operations.md). Fails closed, never letting code through unread: a source
    nested too deeply to read is refused (400), and a checker that breaks answers 503."""
    try:
        return precheck.findings_for(code, file_name, mode)
    except (RecursionError, MemoryError):
        refuse(400, precheck.UNREADABLE)
    except Exception:  # noqa: BLE001 - a fault of the checker, not of the code: the submission may be retried once it is fixed
        refuse(503, precheck.UNAVAILABLE)


def source_precheck(code: str, file_name: str, mode: str, outcomes: Mapping[str, str] | None = None,
                    multi_gpu: bool = False, findings: list[precheck.Finding] | None = None
                    ) -> PrecheckVerdict | None:
    """The source pre-check after every other check, under the competition's outcomes: None when nothing that
    counts fired; a `refuse` verdict is the caller's refusal (400, its detail). `findings` read before (outside
    admission's transaction, say) are judged as they are; otherwise the source is read here (`read_source`)."""
    if findings is None:
        findings = read_source(code, file_name, mode)
    verdict = precheck.verdict_of(findings, outcomes or {}, multi_gpu)
    if verdict is None:
        return None
    return PrecheckVerdict(outcome=verdict.outcome, detail=verdict.detail, findings=[
        PrecheckFinding(rule=f.rule, severity=f.severity, message=f.message, line=f.line) for f in verdict.findings])


def precheck_refusal(verdict: PrecheckVerdict | None) -> Refusal | None:
    return Refusal(400, verdict.detail) if verdict is not None and verdict.outcome == "refuse" else None
