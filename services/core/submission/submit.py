"""The submit use case every front end translates into (docs/http-api.md "Submitting"): the preliminary admission
with what the read model shows, and the SubmissionReceived event that records an admitted submission.

A front end turns its request (an HTTP form, a Discord command) into a Submitter and an Entry, calls `admit`, and
publishes `Admission.received(submission_id)`. The dispatcher judges the event again and its decision stands; how a
front end waits for that decision (the gateway's HTTP answer, the bot's live message) stays with the front end.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from schemas.contracts import ProfileOptions
from schemas.events import SubmissionReceived
from services.core.admission import policy
from services.core.readmodel.admission_reads import admission_facts
from services.core.submission.rate import SubmitRate


@dataclass(frozen=True)
class Submitter:
    """Who submits, through which front end. Only a popcorn-cli identity (`via_cli`) may submit to a closed board."""

    user_id: str
    user_name: str
    banned: bool = False
    via_cli: bool = False
    origin: str = "http"


@dataclass(frozen=True)
class Entry:
    """What is submitted: the board as named, the GPUs, the user mode (`leaderboard` for a ranked run), the file."""

    leaderboard: str
    gpus: tuple[str, ...]
    mode: str
    file_name: str | None
    content: bytes
    deadline_applies: bool = True  # False only for the admin route, which may submit after the deadline
    profile: ProfileOptions | None = None


@dataclass(frozen=True)
class Facts:
    """What the read model shows about a submission before it is judged."""

    accepting: bool
    invited: bool
    board_name: str | None  # the board's own spelling of its name; None when there is no such board
    board: policy.LeaderboardView | None
    rate_limit: policy.RateLimit | None


@dataclass(frozen=True)
class Admission:
    """A submission the preliminary admission let through, ready to be recorded."""

    submitter: Submitter
    entry: Entry
    board_name: str
    admitted: policy.Admitted

    def received(self, submission_id: int) -> SubmissionReceived:
        """The event that records the submission; its id is also the correlation id of everything that follows."""
        who, entry, admitted = self.submitter, self.entry, self.admitted
        return SubmissionReceived(
            submission_id=submission_id, leaderboard=self.board_name, gpus=list(entry.gpus), mode=admitted.mode,
            user_id=who.user_id, user_name=who.user_name, file_name=admitted.file_name, code=admitted.code,
            origin=who.origin, via_cli=who.via_cli, deadline_applies=entry.deadline_applies,
            correlation_id=str(submission_id), profile=entry.profile,
        )


def judge(facts: Facts, submitter: Submitter, entry: Entry, now: datetime) -> Admission:
    """Every check of docs/http-api.md "Submitting" after authentication, in its order; raises policy.Refused. Pure."""
    applicant = policy.Applicant(banned=submitter.banned, via_cli=submitter.via_cli, invited=facts.invited)
    admitted = policy.judge(accepting=facts.accepting, applicant=applicant, leaderboard_name=entry.leaderboard,
                            board=facts.board, gpus=list(entry.gpus), mode=entry.mode, file_name=entry.file_name,
                            content=entry.content, now=now, rate_limit=facts.rate_limit,
                            deadline_applies=entry.deadline_applies, profile=entry.profile)
    # The policy refuses an unknown board first, so an admitted submission's board has a name.
    assert facts.board_name is not None
    return Admission(submitter=submitter, entry=entry, board_name=facts.board_name, admitted=admitted)


async def read_facts(pool, submitter: Submitter, entry: Entry, now: datetime) -> Facts:
    found, board, rate_limit = await admission_facts(pool, entry.leaderboard, submitter.user_id, entry.mode, now)
    return Facts(accepting=found["accepting"], invited=found["invited"], board_name=found["name"], board=board,
                 rate_limit=rate_limit)


async def admit(pool, submitter: Submitter, entry: Entry, rate: SubmitRate | None = None) -> Admission:
    """The preliminary admission with what the read model shows now; raises the first refusal (policy.Refused).
    With `rate`, the submission is counted against the submitter's submit rate first (the gateway counts its own
    before it reads the request's file: services/gateway/edge/ratelimit.py)."""
    if rate is not None:
        await rate.count(submitter.user_id)
    now = datetime.now(UTC)
    return judge(await read_facts(pool, submitter, entry, now), submitter, entry, now)
