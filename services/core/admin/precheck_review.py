"""The pre-check's admin use cases, for the admin routes, `kernelbot precheck` and Discord's `/admin clear-hold`: set
a competition's outcomes per rule, show a submission's verdict, and clear a false positive (which rescores through the
rejudge path). The same clearing lifts a hold of the floor (a score held for review, docs/operations.md)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from schemas.precheck_events import PrecheckCleared, PrecheckPolicySet
from services.core.admission.precheck import RULES, validate_overrides
from services.core.infrastructure import settle
from services.core.readmodel import operator_reads


class PrecheckError(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def verdict_view(row) -> dict[str, Any] | None:
    """A submission's verdict as admins see it: the outcome, the rules that fired and where, and any clearing."""
    if row is None:
        return None
    return {"outcome": row["outcome"], "rules": list(row["rules"]), "findings": row["findings"],
            "detail": row["detail"], "cleared_by": row["cleared_by"],
            "cleared_at": row["cleared_at"].isoformat() if row["cleared_at"] else None,
            "clear_reason": row["clear_reason"]}


def policy_view(outcomes: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Every rule with its outcome on the board: the override where set, else the default."""
    return {name: {"severity": rule.severity, "message": rule.message, "outcome": outcomes.get(name, rule.default),
                   "default": rule.default} for name, rule in sorted(RULES.items())}


async def build_policy(conn, leaderboard: str, outcomes: Any) -> PrecheckPolicySet:
    board = await operator_reads.board(conn, leaderboard)
    if board is None:
        raise PrecheckError(f"Leaderboard `{leaderboard}` does not exist.", 404)
    if not isinstance(outcomes, dict) or not all(isinstance(v, str) for v in outcomes.values()):
        raise PrecheckError("outcomes must be an object of rule name to outcome")
    try:
        checked = validate_overrides(outcomes)
    except ValueError as exc:
        raise PrecheckError(str(exc)) from exc
    return PrecheckPolicySet(leaderboard=board["name"], outcomes=checked, change_id=secrets.token_hex(8))


def holds_view(holds: list[dict]) -> list[dict[str, Any]]:
    """The floor's holds of a submission as admins see them: GPU, rule, reason, the held score and whether cleared."""
    return [{key: hold.get(key) for key in ("gpu", "rule", "reason", "score", "cleared")} for hold in holds]


async def build_clear(conn, submission_id: int, cleared_by: str, reason: str) -> PrecheckCleared:
    """The clearing of a `hacked` verdict or of the floor's hold, refused (with the reason) for anything else."""
    row = await operator_reads.precheck_verdict(conn, submission_id)
    held = row is not None and row["outcome"] == "hacked" and row["cleared_at"] is None
    holds = [] if held else await operator_reads.floor_holds(conn, submission_id)
    if any(not hold["cleared"] for hold in holds):
        return PrecheckCleared(submission_id=submission_id, cleared_by=cleared_by, reason=reason,
                               change_id=secrets.token_hex(8), correlation_id=str(submission_id))
    if holds:
        raise PrecheckError(f"Submission {submission_id}'s floor hold was already cleared", 409)
    if row is None:
        raise PrecheckError(f"Submission {submission_id} has no pre-check verdict and no floor hold", 404)
    if row["outcome"] != "hacked":
        raise PrecheckError(f"Submission {submission_id} was not marked hacked (pre-check outcome: {row['outcome']})",
                            409)
    if row["cleared_at"] is not None:
        raise PrecheckError(f"Submission {submission_id} was already cleared by {row['cleared_by']}", 409)
    return PrecheckCleared(submission_id=submission_id, cleared_by=cleared_by, reason=reason,
                           change_id=secrets.token_hex(8), correlation_id=str(submission_id))


async def wait_for_reinstatement(conn, submission_id: int, timeout_s: float) -> dict | None:
    """The submission's row once it is no longer `hacked` (the scorer reinstated it) and, where the floor held it,
    once its score stands, None on timeout."""

    async def reinstated() -> dict | None:
        status = await operator_reads.submission_status(conn, submission_id)
        if status in (None, "hacked"):
            return None
        if (await operator_reads.floor_holds(conn, submission_id)
                and not await operator_reads.has_score(conn, submission_id)):
            return None
        return {"submission_id": submission_id, "status": status}

    return await settle.until(reinstated, timeout_s, poll_s=0.1)
