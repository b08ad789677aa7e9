"""An upstream submission, with its runs, scores and outcome, as this platform's events (pure).

Upstream keeps one `runs` row per stage (test, benchmark, leaderboard) of each run, a run being a submission's
GPU (`runner`) and seed (`secret`). Those rows become one RunCompleted per run, its stages the runs of a FullResult.
A GPU's score is published as upstream ranks it: the public run's passed score, where a secret leaderboard run on the
same GPU passed and none failed, and the submission was not marked hacked.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import ValidationError

from schemas.contracts import CompileResult, EvalResult, FullResult, RunResult, SystemInfo
from schemas.envelope import Event
from schemas.events import (
    IMPORTED_ORIGIN,
    PlannedRun,
    RunCompleted,
    RunRequested,
    ScoreComputed,
    SubmissionAccepted,
    SubmissionFinished,
    SubmissionReceived,
)
from schemas.precheck_events import PrecheckVerdict
from services.operate.upstream_catalogue import Board, Report, imported, moment
from services.operate.upstream_source import UpstreamSubmission

BACKEND = "upstream"
TERMINAL = ("succeeded", "failed", "timed_out", "hacked")
SYSTEM_FIELDS = ("gpu", "cpu", "runtime", "platform", "torch", "hostname")
MODES_BY_PRECEDENCE = ("leaderboard", "profile", "benchmark", "test")
# A run's stages travel in one event (at most schemas.streams.MAX_EVENT_BYTES): longer output is cut to this.
MAX_OUTPUT_CHARS = 200_000


def capped(text: object, report: Report, submission_id: int, what: str) -> str:
    value = str(text or "")
    if len(value) <= MAX_OUTPUT_CHARS:
        return value
    report.note(f"submission {submission_id}: {what} cut from {len(value)} to {MAX_OUTPUT_CHARS} characters")
    return value[:MAX_OUTPUT_CHARS]


def mode_of(row: dict, runs: list[dict]) -> str:
    stages = {run["mode"] for run in runs}
    for mode in MODES_BY_PRECEDENCE:
        if mode in stages:
            return mode
    return "leaderboard" if row.get("mode_category") == "leaderboard" else "test"


def run_id(submission_id: int, gpu: str, secret: bool, mode: str) -> str:
    if mode == "leaderboard":  # named as the dispatcher names a ranked submission's runs
        return f"{submission_id}.{gpu}.{'secret' if secret else 'public'}"
    return f"{submission_id}.{gpu}.{mode}" + (".secret" if secret else "")


def stage(row: dict, report: Report, submission_id: int) -> EvalResult:
    meta = row.get("meta") or {}
    compilation = None
    if row.get("compilation"):
        try:
            compilation = CompileResult.model_validate(row["compilation"])
        except ValidationError:
            report.note(f"submission {submission_id}: compilation record of run {row['id']} not readable; left out")
    run = RunResult(success=bool(meta.get("success", row["passed"])), passed=bool(row["passed"]),
                    command=str(meta.get("command") or ""),
                    stdout=capped(meta.get("stdout"), report, submission_id, f"{row['mode']} stdout"),
                    stderr=capped(meta.get("stderr"), report, submission_id, f"{row['mode']} stderr"),
                    exit_code=int(meta.get("exit_code") or 0),
                    duration=float(meta.get("duration") or 0.0),
                    result={str(k): str(v) for k, v in (row.get("result") or {}).items()})
    return EvalResult(start=row.get("start_time"), end=row.get("end_time"), compilation=compilation, run=run)


def system_of(rows: list[dict]) -> SystemInfo:
    info: dict = next((r["system_info"] for r in rows if r.get("system_info")), {})
    return SystemInfo(**{name: str(info.get(name) or "") for name in SYSTEM_FIELDS},
                      device_count=int(info.get("device_count") or 0))


def ranked_scores(runs: list[dict]) -> dict[str, tuple[float, float | None]]:
    """(public score, secret score) per GPU where upstream's ranking query ranks the submission."""
    scores: dict[str, tuple[float, float | None]] = {}
    for gpu in dict.fromkeys(r["runner"] for r in runs):
        secret = [r for r in runs if r["runner"] == gpu and r["secret"]]
        passed_secret = [r for r in secret if r["mode"] == "leaderboard" and r["passed"]]
        if not passed_secret or any(not r["passed"] for r in secret):
            continue
        public = [float(r["score"]) for r in runs
                  if r["runner"] == gpu and not r["secret"] and r["score"] is not None and r["passed"]]
        if public:
            secret_score = passed_secret[0]["score"]
            scores[gpu] = (min(public), float(secret_score) if secret_score is not None else None)
    return scores


def outcome(sub: UpstreamSubmission, hacked: bool) -> tuple[str, str | None, bool]:
    """(status, error, whether upstream had finished it)."""
    job = sub.job or {}
    if hacked:
        return "hacked", job.get("error") or "marked hacked upstream", True
    if job.get("status") in TERMINAL:
        return job["status"], job.get("error"), True
    passed = bool(sub.runs) and all(r["passed"] for r in sub.runs)
    if sub.row.get("done"):
        return ("succeeded", None, True) if passed else ("failed", job.get("error") or "a run failed upstream", True)
    return "failed", "not finished on the upstream deployment when it was imported", False


def submission_events(sub: UpstreamSubmission, board: Board, names: dict[str, str],  # noqa: C901 - one pass
                      report: Report) -> list[Event]:
    row, sid = sub.row, int(sub.row["id"])
    user_id = str(row["user_id"])
    user_name = names.get(user_id, user_id)
    submitted = moment(row["submission_time"])
    if sub.code is None:
        report.note(f"submission {sid}: its code is missing upstream; imported with empty code")
    code = (sub.code or b"").decode("utf-8", errors="replace")
    if sub.code is not None and code.encode("utf-8") != sub.code:
        report.note(f"submission {sid}: code is not UTF-8; undecodable bytes replaced")
    mode = mode_of(row, sub.runs)
    groups: dict[tuple[str, bool], list[dict]] = {}
    for run in sub.runs:
        groups.setdefault((run["runner"], bool(run["secret"])), []).append(run)
    gpus = list(dict.fromkeys(gpu for gpu, _ in groups))
    hacked = row.get("status") == "hacked" or (sub.job or {}).get("status") == "hacked"
    status, error, finished = outcome(sub, hacked)
    if not finished:
        report.note(f"submission {sid}: unfinished upstream; imported as failed")
    planned = [PlannedRun(run_id=run_id(sid, gpu, secret, mode), gpu=gpu, secret=secret,
                          mode="private" if secret and mode == "leaderboard" else mode)
               for gpu, secret in groups]
    hold = PrecheckVerdict(outcome="hacked", findings=[], detail=error or "") if hacked else None
    tags = {"correlation_id": str(sid)}
    events: list[Event] = [
        SubmissionReceived(submission_id=sid, leaderboard=board.name, gpus=gpus, mode=mode, user_id=user_id,
                           user_name=user_name, file_name=row.get("file_name") or "submission", code=code,
                           origin=IMPORTED_ORIGIN, deadline_applies=False, occurred_at=submitted, **tags),
        SubmissionAccepted(submission_id=sid, leaderboard=board.name, user_id=user_id, user_name=user_name,
                           mode=mode, ranking_by=board.task.ranking_by, submitted_at=submitted, runs=planned,
                           precheck=hold, imported=True, occurred_at=submitted, **tags),
    ]
    timeout = board.task.ranked_timeout if mode == "leaderboard" else board.task.benchmark_timeout
    ends: list[datetime] = []
    for plan, ((gpu, secret), rows) in zip(planned, groups.items(), strict=True):
        started = min((moment(r["start_time"]) for r in rows if r.get("start_time")), default=submitted)
        ended = max((moment(r["end_time"]) for r in rows if r.get("end_time")), default=started)
        ends.append(ended)
        result = FullResult(success=True, system=system_of(rows),
                            runs={r["mode"]: stage(r, report, sid) for r in rows})
        events.append(RunRequested(run_id=plan.run_id, submission_id=sid, leaderboard=board.name, gpu=gpu,
                                   mode=plan.mode, secret=secret, timeout_s=timeout, occurred_at=started, **tags))
        events.append(RunCompleted(run_id=plan.run_id, submission_id=sid, leaderboard=board.name, gpu=gpu,
                                   mode=plan.mode, secret=secret, ranking_by=board.task.ranking_by, backend=BACKEND,
                                   result=result, occurred_at=ended, **tags))
    done_at = max(ends, default=submitted)
    if not hacked:
        for gpu, (score, secret_score) in ranked_scores(sub.runs).items():
            events.append(ScoreComputed(
                submission_id=sid, leaderboard=board.name, gpu=gpu, user_id=user_id, user_name=user_name,
                run_id=run_id(sid, gpu, False, mode), score=score, secret_score=secret_score,
                ranking_by=board.task.ranking_by, submitted_at=submitted, occurred_at=done_at, **tags))
            report.counts["scores"] += 1
    events.append(SubmissionFinished(submission_id=sid, status=status, error=error, occurred_at=done_at, **tags))
    report.counts[f"submissions {status}"] += 1
    report.counts["runs"] += len(groups)
    return [imported(event) for event in events]
