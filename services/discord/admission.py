"""Admission of a Discord submission: the shared policy (services.core.admission.policy.judge), fed by the same read-model
queries the gateway's intake uses. A Discord identity is not a popcorn-cli one, so closed leaderboards refuse it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
from faststream.nats import NatsBroker

from schemas.events import SubmissionReceived
from services.core.admission import policy
from services.core.admission.source_rules import header_directives
from services.core.readmodel import board_reads
from services.core.readmodel.admission_reads import admission_facts
from services.discord import repository
from services.kit.bus import publish

MODES = {"test": "test", "benchmark": "benchmark", "profile": "profile", "ranked": "leaderboard"}


@dataclass(frozen=True)
class Submitter:
    user_id: str
    user_name: str


@dataclass(frozen=True)
class Script:
    file_name: str
    content: bytes

    def directives(self) -> dict[str, list[str]]:
        """`#!POPCORN` header values; none when the file is not text (the policy then refuses it)."""
        try:
            code = self.content.decode("utf-8")
        except UnicodeDecodeError:
            return {}
        return header_directives(code)


def requested_gpus(option: str | None, script: Script) -> list[str]:
    """GPUs named by the command's option (comma list) or else by the script header; may be empty."""
    if option:
        return [gpu.strip() for gpu in option.split(",") if gpu.strip()]
    return list(script.directives().get("gpus", []))


def requested_board(option: str | None, script: Script) -> str | None:
    if option:
        return option.strip()
    named = script.directives().get("leaderboard")
    return named[0] if named else None


async def board_gpus(pool: asyncpg.Pool, name: str) -> list[str]:
    row = await board_reads.leaderboard(pool, name)
    return sorted(row["gpus"]) if row else []


async def judge(pool: asyncpg.Pool, who: Submitter, leaderboard: str, gpus: list[str], mode: str,
                script: Script) -> tuple[policy.Admitted, str]:
    """Every check of http-api.md §6 in its order; raises policy.Refused. Returns the admitted submission and the
    board's own spelling of its name."""
    now = datetime.now(UTC)
    found, board, rate_limit = await admission_facts(pool, leaderboard, who.user_id, mode, now)
    person = await repository.user(pool, who.user_id)
    applicant = policy.Applicant(banned=bool(person and person["banned"]), via_cli=False, invited=found["invited"])
    admitted = policy.judge(accepting=found["accepting"], applicant=applicant, leaderboard_name=leaderboard,
                            board=board, gpus=gpus, mode=mode, file_name=script.file_name, content=script.content,
                            now=now, rate_limit=rate_limit)
    return admitted, found["name"]


async def record(broker: NatsBroker, submission_id: int, who: Submitter, board_name: str, gpus: list[str],
                 admitted: policy.Admitted) -> None:
    """Publish the submission; the dispatcher judges it again and its decision stands."""
    await publish(broker, SubmissionReceived(
        submission_id=submission_id, leaderboard=board_name, gpus=gpus, mode=admitted.mode, user_id=who.user_id,
        user_name=who.user_name, file_name=admitted.file_name, code=admitted.code, origin="discord", via_cli=False,
        correlation_id=str(submission_id),
    ))
