"""Payloads handed to runners by reference: the dispatcher's links (services/dispatcher/backends/carry.py) served
by the real gateway once each, fetched by the runner's own code; inline where the backend's field holds them."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import asyncpg
import httpx
import pytest

from runner.task.payload import PayloadError, decode_payload, fetch_if_reference
from schemas.contracts import RunPayload
from services.dispatcher.backends.base import LaunchError
from services.dispatcher.backends.carry import GITHUB_INLINE_MAX, PayloadLinks, carried
from tests.support.platform import Platform


@pytest.fixture(scope="module")
def gateway(gateway_processes: Platform) -> Platform:
    """Every service a subprocess here: these tests need the gateway on a port (tests/gateway/conftest.py)."""
    return gateway_processes



def payload(size: int) -> RunPayload:
    import random
    import string

    noise = "".join(random.Random(size).choices(string.ascii_letters, k=size))
    return RunPayload(run_id="42.H100.test", gpu="H100", lang="py", mode="test", main="eval.py",
                      sources={"eval.py": "print(1)\n", "submission.py": "# " + noise + "\n"}, seed=1234)


def make_link(gateway, value: RunPayload, ttl_s: float = 60.0, limit: int = GITHUB_INLINE_MAX) -> str:
    async def go():
        pool = await asyncpg.create_pool(gateway.database_url, min_size=1, max_size=2)
        try:
            return await carried(value, "42.H100.test.1", limit=limit,
                                 links=PayloadLinks(pool, gateway.url, ttl_s), carrier="GitHub's inputs")
        finally:
            await pool.close()

    return asyncio.run(go())


def test_a_small_payload_stays_inline_and_a_large_one_becomes_a_link(gateway):
    small = make_link(gateway, payload(100))
    assert decode_payload(small).sources["submission.py"].startswith("# ")  # the payload itself
    link = make_link(gateway, payload(200_000))
    assert link.startswith(f"{gateway.url}/runner/payloads/") and len(link) < 200


def test_a_link_is_served_once_with_no_caching_then_gone(gateway):
    value = payload(200_000)
    link = make_link(gateway, value)
    first = httpx.get(link)
    assert first.status_code == 200
    assert first.headers["cache-control"] == "no-store"
    assert decode_payload(first.text) == value
    second = httpx.get(link)
    assert second.status_code == 404
    assert "already fetched or expired" in second.json()["detail"]


def test_two_runners_racing_for_one_link_get_it_once(gateway):
    link = make_link(gateway, payload(200_000))
    with ThreadPoolExecutor(4) as pool:
        codes = sorted(pool.map(lambda _: httpx.get(link).status_code, range(4)))
    assert codes == [200, 404, 404, 404]


def test_an_expired_or_unknown_link_is_refused(gateway):
    expired = make_link(gateway, payload(200_000), ttl_s=-1)
    assert httpx.get(expired).status_code == 404
    assert httpx.get(f"{gateway.url}/runner/payloads/not-a-token").status_code == 404


def test_the_runner_fetches_a_link_and_never_repeats_its_token_in_an_error(gateway):
    value = payload(200_000)
    link = make_link(gateway, value)
    assert decode_payload(fetch_if_reference(link)) == value
    with pytest.raises(PayloadError) as refused:
        fetch_if_reference(link)
    token = link.rsplit("/", 1)[1]
    assert "answered 404" in str(refused.value) and token not in str(refused.value)


def test_without_a_payload_url_a_payload_too_large_is_refused_saying_what_to_set():
    with pytest.raises(LaunchError, match="set KB_PAYLOAD_URL"):
        asyncio.run(carried(payload(200_000), "k", limit=GITHUB_INLINE_MAX, links=None, carrier="GitHub's inputs"))
