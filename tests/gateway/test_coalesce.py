"""Reads coalesced by the gateway's hot path: shared only by requests that arrived before the read was sent."""

from __future__ import annotations

import asyncio

import pytest

from services.gateway.fastpaths.coalesce import Coalesced


def test_requests_arriving_together_share_one_read_and_later_ones_get_a_fresh_read() -> None:
    async def scenario() -> None:
        reads: list[int] = []
        release = asyncio.Event()
        version = 1

        async def read(name: str) -> tuple[str, int]:
            seen = version  # what the database holds when the read is sent
            reads.append(seen)
            await release.wait()
            return name, seen

        coalesced = Coalesced(read)
        together = [asyncio.ensure_future(coalesced.get("board")) for _ in range(5)]
        await asyncio.sleep(0)  # the read is sent
        await asyncio.sleep(0)
        version = 2  # a change commits while the first read is in flight
        later = asyncio.ensure_future(coalesced.get("board"))
        await asyncio.sleep(0)
        release.set()
        assert await asyncio.gather(*together) == [("board", 1)] * 5
        assert await later == ("board", 2)  # never the answer of a read sent before it arrived
        assert reads == [1, 2]

    asyncio.run(scenario())


def test_a_failed_read_fails_every_request_that_shared_it_and_the_next_one_reads_again() -> None:
    async def scenario() -> None:
        calls = 0

        async def read(name: str) -> str:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise ConnectionError("database away")
            return name

        coalesced = Coalesced(read)
        results = await asyncio.gather(*(coalesced.get("b") for _ in range(3)), return_exceptions=True)
        assert all(isinstance(r, ConnectionError) for r in results)
        assert await coalesced.get("b") == "b"
        assert calls == 2

    asyncio.run(scenario())


@pytest.mark.parametrize("keys", [("a", "H100"), ("a", "A100")])
def test_different_keys_never_share_a_read(keys) -> None:
    async def scenario() -> None:
        coalesced = Coalesced(lambda name, gpu: asyncio.sleep(0, result=(name, gpu)))
        assert await asyncio.gather(coalesced.get("a", "H100"), coalesced.get(*keys)) == [("a", "H100"), keys]

    asyncio.run(scenario())
