"""The standings cache's renders (services/gateway/fastpaths/standings_cache.py): one per change and variant, however many
requests wait for it; a request never gets a body older than its version, nor waits behind an older render."""

from __future__ import annotations

import asyncio

from services.gateway.fastpaths.standings_cache import StandingsCache

BOARD, GPU, VARIANT = 7, "H100", ("ranking", 20, 0)


async def settled() -> None:
    """Until the requests just made have started the renders they start (a render is a task of its own)."""
    for _ in range(3):
        await asyncio.sleep(0)


class Standings:
    """A board whose standings move; each render reads what they hold when it starts, and ends when released."""

    def __init__(self) -> None:
        self.version = 1
        self.renders: list[int] = []
        self.release = asyncio.Event()

    async def render(self) -> bytes:
        seen = self.version
        self.renders.append(seen)
        await self.release.wait()
        return f"standings at {seen}".encode()


def test_requests_of_one_version_share_one_render() -> None:
    async def scenario() -> None:
        cache, standings = StandingsCache(), Standings()
        waiting = [asyncio.ensure_future(cache.fetch(BOARD, GPU, 1, VARIANT, standings.render)) for _ in range(50)]
        await settled()
        standings.release.set()
        bodies = {entry.value for entry in await asyncio.gather(*waiting)}
        assert bodies == {b"standings at 1"} and standings.renders == [1]
        assert cache.get(BOARD, GPU, 1, VARIANT).value == b"standings at 1"  # kept for the next request

    asyncio.run(scenario())


def test_a_request_of_a_newer_version_never_takes_an_older_render_and_an_older_one_takes_the_newer() -> None:
    async def scenario() -> None:
        cache, standings = StandingsCache(), Standings()
        first = asyncio.ensure_future(cache.fetch(BOARD, GPU, 1, VARIANT, standings.render))
        await settled()
        standings.version = 2  # a change commits while version 1 renders
        newer = asyncio.ensure_future(cache.fetch(BOARD, GPU, 2, VARIANT, standings.render))
        await settled()
        # a request that read version 1 before the change: the render in flight is for version 2, newer than its own
        late = asyncio.ensure_future(cache.fetch(BOARD, GPU, 1, VARIANT, standings.render))
        await settled()
        standings.release.set()
        assert (await first).value == b"standings at 1"
        assert (await newer).value == b"standings at 2"
        assert (await late).value == b"standings at 2"
        assert standings.renders == [1, 2]  # the late request rendered nothing of its own
        assert (await newer).etag.startswith('"2-') and (await first).etag.startswith('"1-')
        assert cache.get(BOARD, GPU, 1, VARIANT).value == b"standings at 2"  # the newest body serves version 1 too

    asyncio.run(scenario())


def test_a_change_renders_ahead_only_what_was_read_and_requests_join_that_render() -> None:
    async def scenario() -> None:
        cache, standings = StandingsCache(), Standings()
        standings.release.set()
        await cache.fetch(BOARD, GPU, 1, VARIANT, standings.render)
        cache.put(BOARD, GPU, 1, ("count", None), b"unread", standings.render)  # rendered, never served
        standings.release.clear()
        standings.version = 2
        cache.moved(BOARD, GPU, 2)
        await settled()
        assert standings.renders == [1, 2]  # the ranking read at version 1 is rendered ahead; the unread count is not
        assert cache.get(BOARD, GPU, 2, VARIANT) is None
        joined = [asyncio.ensure_future(cache.fetch(BOARD, GPU, 2, VARIANT, standings.render)) for _ in range(10)]
        await settled()
        standings.release.set()
        assert {entry.value for entry in await asyncio.gather(*joined)} == {b"standings at 2"}
        assert standings.renders == [1, 2]
        cache.moved(BOARD, GPU, 2)  # a notification repeated, or late: nothing to do
        cache.moved(BOARD, GPU, 1)
        assert standings.renders == [1, 2]

    asyncio.run(scenario())


def test_a_failed_render_fails_its_waiters_and_the_next_request_renders_again() -> None:
    async def scenario() -> None:
        cache, calls = StandingsCache(), []

        async def render() -> bytes:
            calls.append(1)
            await settled()
            if len(calls) == 1:
                raise ConnectionError("database away")
            return b"body"

        results = await asyncio.gather(*(cache.fetch(BOARD, GPU, 1, VARIANT, render) for _ in range(3)),
                                       return_exceptions=True)
        assert all(isinstance(r, ConnectionError) for r in results) and len(calls) == 1
        assert (await cache.fetch(BOARD, GPU, 1, VARIANT, render)).value == b"body" and len(calls) == 2

    asyncio.run(scenario())


def test_a_request_gone_before_its_render_ends_leaves_it_to_the_others() -> None:
    async def scenario() -> None:
        cache, standings = StandingsCache(), Standings()
        leaving = asyncio.ensure_future(cache.fetch(BOARD, GPU, 1, VARIANT, standings.render))
        staying = asyncio.ensure_future(cache.fetch(BOARD, GPU, 1, VARIANT, standings.render))
        await settled()
        leaving.cancel()
        standings.release.set()
        assert (await staying).value == b"standings at 1" and standings.renders == [1]

    asyncio.run(scenario())
