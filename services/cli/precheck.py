"""`kernelbot precheck`: the source pre-check's operator commands (docs/operations.md), as events like the admin
routes: a competition's outcomes per rule, a submission's verdict, and clearing a false positive (which reinstates
the submission and rescores its board through the rejudge path)."""

from __future__ import annotations

import asyncio
import getpass
import json
from typing import Annotated

import typer

from services.cli.options import DatabaseUrl, NatsUrl, fail, urls

precheck_app = typer.Typer(help="The source pre-check: rules per competition, verdicts, false positives.",
                           no_args_is_help=True)


def _outcomes(pairs: list[str]) -> dict[str, str]:
    found = {}
    for pair in pairs:
        rule, sep, outcome = pair.partition("=")
        if not sep:
            raise fail(f"expected RULE=OUTCOME, got {pair!r}")
        found[rule.strip()] = outcome.strip()
    return found


@precheck_app.command("rules")
def rules(
    leaderboard: Annotated[str, typer.Option("--leaderboard", "-l", help="The competition's leaderboard")],
    set_: Annotated[list[str], typer.Option("--set", help="RULE=OUTCOME (refuse | hacked | warn | off)")] = None,
    nats_url: NatsUrl = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Show a leaderboard's rules and outcomes; with --set, change them (one PrecheckPolicySet event)."""
    from services.core.admin import precheck_review as precheck
    from services.core.readmodel import operator_reads
    from services.kit.bus import publish_all
    from services.operate.db import connection

    nats, database = urls(nats_url, database_url)

    async def run() -> None:
        async with connection(database) as conn:
            if set_:
                current = await operator_reads.precheck_policy(conn, leaderboard)
                try:
                    event = await precheck.build_policy(conn, leaderboard, current | _outcomes(set_))
                except precheck.PrecheckError as exc:
                    raise fail(str(exc)) from exc
                await publish_all(nats, [event])
                typer.echo(f"Set the pre-check outcomes of {event.leaderboard}: {json.dumps(event.outcomes)}")
                return
            if await operator_reads.board(conn, leaderboard) is None:
                raise fail(f"Leaderboard `{leaderboard}` does not exist.")
            for name, rule in precheck.policy_view(await operator_reads.precheck_policy(conn, leaderboard)).items():
                typer.echo(f"{name:<14} {rule['severity']:<7} {rule['outcome']:<7} {rule['message']}")

    asyncio.run(run())


@precheck_app.command("clear")
def clear(
    submission_id: Annotated[int, typer.Argument(help="The submission marked hacked or held for review")],
    reason: Annotated[str, typer.Option(help="Why it is a false positive, for the audit trail")] = "",
    wait: Annotated[float, typer.Option(help="Seconds to wait for the submission to be reinstated")] = 60.0,
    nats_url: NatsUrl = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Clear a false hold, a `hacked` verdict or a score the floor held for review: the scorer reinstates the
    submission and rescores its board."""
    from services.core.admin import precheck_review as precheck
    from services.kit.bus import publish_all
    from services.operate.db import connection

    nats, database = urls(nats_url, database_url)

    async def run() -> None:
        async with connection(database) as conn:
            try:
                event = await precheck.build_clear(conn, submission_id, getpass.getuser(), reason)
            except precheck.PrecheckError as exc:
                raise fail(str(exc)) from exc
            await publish_all(nats, [event])
            typer.echo(f"Cleared the hold of submission {submission_id}")
            done = await precheck.wait_for_reinstatement(conn, submission_id, wait)
            if done is None:
                raise fail(f"submission {submission_id} was not reinstated within {wait:.0f}s; is the scorer "
                           "running? (`kernelbot events tail --type SubmissionReinstated`)")
            typer.echo(f"Submission {submission_id} is now {done['status']}; its board is rescored "
                       "(`kernelbot events tail --type ScoreRevised`).")

    asyncio.run(run())


def register(app: typer.Typer) -> None:
    app.add_typer(precheck_app, name="precheck")
