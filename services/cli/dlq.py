"""`kernelbot dlq list|show|redrive|purge`: dead letters, with the reason each message failed."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from services.cli.options import NatsUrl, fail, urls

dlq_app = typer.Typer(help="Messages a consumer could not handle, and why.", no_args_is_help=True)
Consumer = Annotated[str, typer.Option("--consumer", "-c", help="Only dead letters of this durable consumer")]
Seqs = Annotated[list[int], typer.Argument(help="Dead-letter sequence numbers (see `kernelbot dlq list`)")]


def _with_client(url: str, work):
    from services.operate.stream import connected

    async def run():
        async with connected(url) as client:
            return await work(client)

    return asyncio.run(run())


async def _chosen(client, seqs: list[int] | None, consumer: str | None, every: bool):
    from services.operate import deadletters

    if seqs:
        return [await deadletters.show(client, seq) for seq in seqs]
    if not every and consumer is None:
        raise fail("name dead letters by sequence, or pass --consumer or --all")
    return await deadletters.listing(client, consumer)


@dlq_app.command("list")
def list_letters(consumer: Consumer = None, nats_url: NatsUrl = None) -> None:
    """One line per dead letter: sequence, consumer, original subject and sequence, deliveries, reason."""
    from services.operate import deadletters

    letters = _with_client(urls(nats_url)[0], lambda client: deadletters.listing(client, consumer))
    if not letters:
        typer.echo("No dead letters.")
        return
    typer.echo(f"{'seq':>6}  {'consumer':<24} {'subject':<26} {'evt seq':>8} {'tries':>5}  reason")
    for letter in letters:
        typer.echo(f"{letter.seq:>6}  {letter.consumer:<24} {letter.subject or '-':<26} {letter.stream_seq:>8} "
                   f"{letter.deliveries:>5}  {letter.reason}")


@dlq_app.command()
def show(seq: int, nats_url: NatsUrl = None) -> None:
    """A dead letter in full: its headers, its reason and the original message."""
    from nats.js.errors import NotFoundError

    from services.operate import deadletters

    try:
        letter = _with_client(urls(nats_url)[0], lambda client: deadletters.show(client, seq))
    except NotFoundError as exc:
        raise fail(f"no dead letter {seq}") from exc
    typer.echo(f"dead letter {letter.seq} of consumer {letter.consumer}")
    typer.echo(f"reason: {letter.reason}")
    typer.echo(f"original: {letter.subject or '(see the events stream)'} at events sequence {letter.stream_seq}, "
               f"{letter.deliveries} deliveries")
    for key, value in sorted(letter.headers.items()):
        typer.echo(f"  {key}: {value}")
    if letter.data:
        typer.echo(letter.data.decode("utf-8", errors="replace"))


@dlq_app.command()
def redrive(seqs: Seqs = None, consumer: Consumer = None,
            every: Annotated[bool, typer.Option("--all", help="Every dead letter")] = False,
            nats_url: NatsUrl = None) -> None:
    """Publish dead letters again on their original subjects (after a fix), then remove them."""
    from services.operate import deadletters

    async def work(client):
        letters = await _chosen(client, seqs, consumer, every)
        return [(letter.seq, await deadletters.redrive(client, letter)) for letter in letters]

    for seq, message_id in _with_client(urls(nats_url)[0], work):
        typer.echo(f"redriven {seq} as {message_id}")


@dlq_app.command()
def purge(seqs: Seqs = None, consumer: Consumer = None,
          every: Annotated[bool, typer.Option("--all", help="Every dead letter")] = False,
          nats_url: NatsUrl = None) -> None:
    """Delete dead letters for good."""
    from services.operate import deadletters

    async def work(client):
        return await deadletters.purge(client, await _chosen(client, seqs, consumer, every))

    typer.echo(f"purged {_with_client(urls(nats_url)[0], work)} dead letters")
