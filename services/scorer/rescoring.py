"""Pure rejudging: a board's scores recomputed under a rule, what changed, and who now holds each rank."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from schemas.contracts import FullResult
from schemas.events import PlannedRun
from services.scorer import fingerprints, scoring
from services.scorer.scoring import GpuScore, RunVerdict


@dataclass(frozen=True)
class Judged:
    """One ranked submission as the scorer knows it, with the results of its runs."""

    submission_id: int
    user_id: str
    user_name: str
    mode: str
    submitted_at: datetime
    planned: list[PlannedRun]
    verdicts: dict[str, RunVerdict]
    results: dict[str, FullResult]  # the stored RunCompleted result of each run that completed
    # the pre-check's or the floor's hold: `hacked` and `review` never rank; `cleared` ranks, and had no score
    # before this rescore
    hold: str | None = None


@dataclass(frozen=True)
class Revision:
    submission: Judged
    gpu: str
    before: GpuScore | None
    after: GpuScore | None
    reason: str = ""


def rescored_verdicts(judged: Judged, ranking_by: str, development: bool = False) -> dict[str, RunVerdict]:
    """Every completed run judged again under `ranking_by` (and the development mode now in force); runs that never
    completed keep their verdict."""
    verdicts = dict(judged.verdicts)
    for run in judged.planned:
        result = judged.results.get(run.run_id)
        if result is not None:
            verdicts[run.run_id] = scoring.verdict_of(result, run.mode, ranking_by, development)
    return verdicts


def scores_of(judged: Judged, verdicts: dict[str, RunVerdict], gpus: set[str] | None) -> dict[str, GpuScore]:
    if judged.hold in ("hacked", "review"):  # held by the pre-check or by the floor (holds.py)
        return {}
    if any(run.run_id not in verdicts for run in judged.planned):
        return {}  # not judged yet: a rejudge leaves it to its own judgement
    decision = scoring.decide(judged.mode, judged.planned, verdicts)
    return {s.gpu: s for s in decision.scores if gpus is None or s.gpu in gpus}


def comparable(scores: dict[str, GpuScore], references: dict[str, dict[str, str]] | None
               ) -> tuple[dict[str, GpuScore], dict[str, str]]:
    """The scores measured on their board's reference hardware, and why each other one is not; all of them when no
    reference is asked for."""
    if references is None:
        return scores, {}
    kept, reasons = {}, {}
    for gpu, score in scores.items():
        found = fingerprints.differences(references.get(gpu, {}), score.hardware)
        if found:
            reasons[gpu] = fingerprints.mismatch_reason(gpu, found)
        else:
            kept[gpu] = score
    return kept, reasons


def references_of(judged: list[Judged], stored: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """Each GPU's reference hardware: the one the board recorded, else the earliest scored submission's."""
    found = dict(stored)
    for one in sorted(judged, key=lambda j: (j.submitted_at, j.submission_id)):
        for gpu, score in scores_of(one, one.verdicts, None).items():
            if score.hardware:
                found.setdefault(gpu, score.hardware)
    return found


def rejection_reasons(judged: Judged, verdicts: dict[str, RunVerdict]) -> dict[str, str]:
    decision = scoring.decide(judged.mode, judged.planned, verdicts)
    return {r.gpu: r.reason for r in decision.rejections}


def revisions(judged: Judged, ranking_by: str, gpus: set[str] | None,
              references: dict[str, dict[str, str]] | None = None, development: bool = False,
              ) -> tuple[list[Revision], dict[str, RunVerdict]]:
    """What a rescore changes for one submission, and its new verdicts; with `references`, a score measured on
    other hardware than its board's is withdrawn; outside `development` mode, so is one whose runs were not fully
    isolated (ranked while development mode was on)."""
    new_verdicts = rescored_verdicts(judged, ranking_by, development)
    before = {} if judged.hold == "cleared" else scores_of(judged, judged.verdicts, gpus)
    after, mismatched = comparable(scores_of(judged, new_verdicts, gpus), references)
    reasons = rejection_reasons(judged, new_verdicts) if before.keys() - after.keys() else {}
    reasons |= mismatched
    changed = []
    for gpu in sorted(before.keys() | after.keys()):
        old, new = before.get(gpu), after.get(gpu)
        if old is None or new is None or old.score != new.score or old.secret_score != new.secret_score:
            changed.append(Revision(judged, gpu, old, new, reasons.get(gpu, "")))
    return changed, new_verdicts
