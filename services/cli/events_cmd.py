"""`kernelbot events tail|export|import|replay`: the event log, for operators (they talk to NATS and Postgres)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer

from schemas.events import CATALOGUE
from services.cli.options import DatabaseUrl, NatsUrl, fail, urls

events_app = typer.Typer(help="Read, copy and replay the event log.", no_args_is_help=True)

SUBJECT_OF = {event.__name__: event.subject for event in CATALOGUE}


def matches(data, submission: int | None, leaderboard: str | None) -> bool:
    if not isinstance(data, dict):  # a message that is not an event (dead-lettered poison) matches no filter
        return submission is None and leaderboard is None
    if submission is not None and str(submission) not in (str(data.get("submission_id")), data.get("correlation_id")):
        return False
    if leaderboard is not None:
        board = data.get("leaderboard") or data.get("name") or ""
        if board.lower() != leaderboard.lower():
            return False
    return True


def summary(record: dict) -> str:
    data = record.get("data") if isinstance(record.get("data"), dict) else {}
    kind = str(data.get("event_id", "")).split(":", 1)[0] or record["subject"]
    details = {k: data[k] for k in ("submission_id", "leaderboard", "gpu", "run_id", "status", "score", "reason")
               if isinstance(data, dict) and data.get(k) not in (None, "")}
    shown = " ".join(f"{k}={v}" for k, v in details.items())
    return f"{record['seq']:>8} {record['time'] or '':<32} {kind:<24} {shown}"


@events_app.command()
def tail(
    type_: Annotated[list[str], typer.Option("--type", "-t", help="Event type, e.g. RunCompleted (repeatable)")] = None,
    submission: Annotated[int, typer.Option("--submission", "-s", help="Only events of this submission")] = None,
    leaderboard: Annotated[str, typer.Option("--leaderboard", "-l", help="Only events of this leaderboard")] = None,
    from_seq: Annotated[int, typer.Option(help="Start at this stream sequence (default: new events only)")] = 0,
    limit: Annotated[int, typer.Option(help="Stop after this many events (0: never)")] = 0,
    idle: Annotated[float, typer.Option(help="Stop after this many seconds without an event (0: never)")] = 0.0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON record per line")] = False,
    nats_url: NatsUrl = None,
) -> None:
    """Follow events as they are stored, filtered by type, submission and leaderboard."""
    from services.operate import stream as log

    unknown = [t for t in type_ or () if t not in SUBJECT_OF]
    if unknown:
        raise fail(f"unknown event type {', '.join(unknown)}; known: {', '.join(sorted(SUBJECT_OF))}")
    subjects = {SUBJECT_OF[t] for t in type_ or ()}
    url, _ = urls(nats_url)

    async def follow() -> None:
        shown = 0
        async with log.connected(url) as client:
            subject = next(iter(subjects)) if len(subjects) == 1 else "evt.>"
            async for message in log.read_stream(client, start_seq=from_seq, subject=subject, follow=True,
                                                 idle_s=idle):
                if subjects and message.subject not in subjects:
                    continue
                record = message.to_record()
                if not matches(record.get("data"), submission, leaderboard):
                    continue
                typer.echo(json.dumps(record) if as_json else summary(record))
                shown += 1
                if limit and shown >= limit:
                    return

    asyncio.run(follow())


def without_clear_cli_id(record: dict) -> dict:
    """An exported message as if its event had been recorded with a hashed CLI id: the payload is read as the ledger
    reads it (schemas/credentials.py) and the message id, which ended with the clear id, names the digest."""
    from schemas.credentials import read_clear_id

    data = record.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("cli_id"), str) or not data["cli_id"]:
        return record
    clear, hashed = data["cli_id"], read_clear_id(data)
    assert isinstance(hashed, dict)

    def scrub(text):
        return text.replace(clear, hashed["cli_id_sha256"]) if isinstance(text, str) else text

    return record | {"data": hashed, "msg_id": scrub(record.get("msg_id")),
                     "headers": {name: scrub(value) for name, value in (record.get("headers") or {}).items()}}


@events_app.command("export")
def export_events(
    output: Annotated[Path, typer.Argument(help="JSON Lines file to write ('-' for standard output)")],
    from_seq: Annotated[int, typer.Option(help="First stream sequence")] = 1,
    hash_cli_ids: Annotated[bool, typer.Option(
        help="Write CLI ids that events recorded before ids were hashed carry in clear as their digests")] = False,
    nats_url: NatsUrl = None,
) -> None:
    """Write the whole event stream, one message per line with its stream sequence and message id."""
    from services.operate import stream as log

    url, _ = urls(nats_url)

    async def export(out) -> int:
        count = 0
        async with log.connected(url) as client:
            async for message in log.read_stream(client, start_seq=from_seq):
                record = message.to_record()
                if hash_cli_ids:
                    record = without_clear_cli_id(record)
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                count += 1
        return count

    if str(output) == "-":
        import sys

        asyncio.run(export(sys.stdout))
        return
    with output.open("w", encoding="utf-8") as out:
        count = asyncio.run(export(out))
    typer.echo(f"Exported {count} events to {output}", err=True)


@events_app.command("import")
def import_events(
    source: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="JSON Lines file from `export`")],
    resume: Annotated[bool, typer.Option(help="Continue an interrupted import: skip ids already stored")] = False,
    nats_url: NatsUrl = None,
) -> None:
    """Load an exported log into an EMPTY events stream, each message under its original message id."""
    from services.operate import stream as log
    from services.operate.stream import StoredMessage

    url, _ = urls(nats_url)

    messages = []
    with source.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    messages.append(StoredMessage.from_record(json.loads(line)))
                except (ValueError, KeyError) as exc:
                    raise fail(f"{source}:{number}: not an exported event ({exc})") from exc

    async def load() -> tuple[int, int]:
        async with log.connected(url) as client:
            try:
                return await log.import_messages(client, messages, resume=resume)
            except log.ImportRefused as exc:
                raise fail(str(exc)) from exc

    stored, skipped = asyncio.run(load())
    typer.echo(f"Imported {stored} events; {skipped} already present were skipped")


@events_app.command()
def replay(
    projection: Annotated[str, typer.Argument(help="ledger | scorer | all")] = "all",
    source: Annotated[str, typer.Option(help="archive (Postgres) | stream (NATS)")] = "archive",
    nats_url: NatsUrl = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Drop a projection and rebuild it from the log, with the owning service's own code."""
    from services.operate import replay as rebuild

    if projection in rebuild.NOT_REPLAYABLE:
        raise fail(rebuild.NOT_REPLAYABLE[projection])
    chosen = list(rebuild.PROJECTIONS) if projection == "all" else [projection]
    if any(p not in rebuild.PROJECTIONS for p in chosen):
        raise fail(f"unknown projection {projection!r}; choose ledger, scorer or all")
    if source not in ("archive", "stream"):
        raise fail(f"unknown source {source!r}; choose archive or stream")
    nats, database = urls(nats_url, database_url)

    async def run_all() -> None:
        from services.operate.db import connection

        async with connection(database) as conn:
            for name in chosen:
                total = await rebuild.planned_work(conn, name)
                with typer.progressbar(length=total, label=f"Rebuilding {name} from the {source}",
                                       file=None) as bar:
                    applied = await rebuild.REBUILDERS[name](conn, source, nats, bar.update)
                typer.echo(f"{name}: {applied} events applied")

    asyncio.run(run_all())
