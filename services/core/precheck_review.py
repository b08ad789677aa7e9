"""The pre-check's admin use cases, for the admin routes and `kernelbot precheck`: set a competition's outcomes per
rule, show a submission's verdict, and clear a false positive (which rescores through the rejudge path)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from schemas.precheck_events import PrecheckCleared, PrecheckPolicySet
from services.core import operations_repository as repository
from services.core import settle
from services.core.admission.precheck import RULES, validate_overrides


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
    board = await repository.board(conn, leaderboard)
    if board is None:
        raise PrecheckError(f"Leaderboard `{leaderboard}` does not exist.", 404)
    if not isinstance(outcomes, dict) or not all(isinstance(v, str) for v in outcomes.values()):
        raise PrecheckError("outcomes must be an object of rule name to outcome")
    try:
        checked = validate_overrides(outcomes)
    except ValueError as exc:
        raise PrecheckError(str(exc)) from exc
    return PrecheckPolicySet(leaderboard=board["name"], outcomes=checked, change_id=secrets.token_hex(8))


async def build_clear(conn, submission_id: int, cleared_by: str, reason: str) -> PrecheckCleared:
    """The clearing of a `hacked` verdict, refused (with the reason) for anything else."""
    row = await repository.precheck_verdict(conn, submission_id)
    if row is None:
        raise PrecheckError(f"Submission {submission_id} has no pre-check verdict", 404)
    if row["outcome"] != "hacked":
        raise PrecheckError(f"Submission {submission_id} was not marked hacked (pre-check outcome: {row['outcome']})",
                            409)
    if row["cleared_at"] is not None:
        raise PrecheckError(f"Submission {submission_id} was already cleared by {row['cleared_by']}", 409)
    return PrecheckCleared(submission_id=submission_id, cleared_by=cleared_by, reason=reason,
                           change_id=secrets.token_hex(8), correlation_id=str(submission_id))


async def wait_for_reinstatement(conn, submission_id: int, timeout_s: float) -> dict | None:
    """The submission's row once it is no longer `hacked` (the scorer reinstated it), None on timeout."""

    async def reinstated() -> dict | None:
        status = await repository.submission_status(conn, submission_id)
        return {"submission_id": submission_id, "status": status} if status not in (None, "hacked") else None

    return await settle.until(reinstated, timeout_s, poll_s=0.1)
