"""The rule that tells popcorn-cli's poll loop from a one-off read (services/gateway/fastpaths/long_poll.py), and the hold."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from services.gateway.fastpaths.long_poll import PollMemory, hold_until_done, is_poll_loop

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_first_poll_right_after_the_post_is_a_poll_loop():
    assert is_poll_loop(at(0.05), submitted_at=at(0), previous_answer=None)
    assert is_poll_loop(at(2.0), submitted_at=at(0), previous_answer=None)


def test_a_read_later_than_the_first_poll_window_without_a_5_s_beat_is_one_off():
    assert not is_poll_loop(at(2.5), submitted_at=at(0), previous_answer=None)
    assert not is_poll_loop(at(60), submitted_at=at(0), previous_answer=at(59))  # show, show again at once
    assert not is_poll_loop(at(60), submitted_at=at(0), previous_answer=at(50))  # show, show again 10 s later


def test_the_next_tick_5_s_after_an_answer_is_a_poll_loop():
    assert is_poll_loop(at(25.1), submitted_at=at(0), previous_answer=at(20.05))
    assert is_poll_loop(at(4.0), submitted_at=None, previous_answer=at(0))
    assert not is_poll_loop(at(8.5), submitted_at=None, previous_answer=at(0))


def test_memory_forgets_done_submissions_and_the_oldest_pairs():
    memory = PollMemory(size=2)
    memory.answered("u", 1, at(0), done=False)
    memory.answered("u", 2, at(1), done=False)
    memory.answered("u", 3, at(2), done=False)
    assert memory.previous("u", 1) is None and memory.previous("u", 3) == at(2)
    memory.answered("u", 3, at(3), done=True)
    assert memory.previous("u", 3) is None
    assert memory.previous("v", 2) is None  # another caller's poll is not this one's loop


def test_hold_answers_when_a_change_makes_it_done_and_never_misses_one_between_read_and_wait():
    async def scenario():
        state = {"done": False, "reads": 0}
        changes: list[asyncio.Future] = []

        def changed():
            future = asyncio.get_running_loop().create_future()
            changes.append(future)
            return future

        async def read():
            state["reads"] += 1
            if state["reads"] == 1:  # the change lands between this read and the wait: it must not be missed
                state["done"] = True
                changes[-1].set_result(None)
                return {"done": False}
            return {"done": state["done"]}

        started = asyncio.get_running_loop().time()
        view = await hold_until_done(read, changed, budget_s=10)
        return view, asyncio.get_running_loop().time() - started, state["reads"]

    async def first_change():
        # the first read is not done; the first change comes 0.1 s later
        loop = asyncio.get_running_loop()
        futures = []

        def changed():
            futures.append(loop.create_future())
            loop.call_later(0.1, lambda f=futures[-1]: f.done() or f.set_result(None))
            return futures[-1]

        reads = iter([{"done": False}, {"done": False}, {"done": True}])
        return await hold_until_done(lambda: asyncio.sleep(0, next(reads)), changed, budget_s=10)

    view, took, _ = asyncio.run(scenario())
    assert view["done"] is True and took < 1
    assert asyncio.run(first_change())["done"] is True


def test_hold_gives_up_after_its_budget_with_the_view_as_it_is():
    async def scenario():
        loop = asyncio.get_running_loop()
        started = loop.time()
        view = await hold_until_done(lambda: asyncio.sleep(0, {"done": False}), loop.create_future, budget_s=0.3)
        return view, loop.time() - started

    view, took = asyncio.run(scenario())
    assert view == {"done": False} and 0.25 < took < 2
