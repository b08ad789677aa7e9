"""The one read-your-own-write wait (services.core.infrastructure.settle) that the gateway and the bot share."""

from __future__ import annotations

import asyncio

from services.core.infrastructure import settle


def test_until_returns_the_first_truthy_answer_of_the_probe():
    answers = iter([None, False, {}, {"row": 1}, {"row": 2}])
    calls = []

    async def probe():
        calls.append(1)
        return next(answers)

    assert asyncio.run(settle.until(probe, timeout_s=5.0, poll_s=0)) == {"row": 1}
    assert len(calls) == 4


def test_until_gives_up_after_its_timeout_having_probed_at_least_once():
    calls = []

    async def probe():
        calls.append(1)
        return None

    assert asyncio.run(settle.until(probe, timeout_s=0.0)) is None
    assert len(calls) == 1
