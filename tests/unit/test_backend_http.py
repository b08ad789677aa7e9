"""Which HTTP answers make a backend ask again later (services/dispatcher/backends/http.py), through httpx's mock
transport: no network, the real client and the real function both HTTP backends call."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from services.dispatcher.backends import http
from services.dispatcher.backends.base import BackendUnavailable, JobLost
from services.dispatcher.backends.buildkite import BuildkiteBackend
from services.dispatcher.backends.slurm import SlurmBackend
from services.dispatcher.catalogue import BuildkiteConfig, SlurmConfig


def answer(status: int, answers: tuple[int, ...] = ()) -> int:
    """Send one GET to a server that answers `status`; the status we got back, or -1 for BackendUnavailable."""
    async def go() -> int:
        transport = httpx.MockTransport(lambda request: httpx.Response(status, text=f"status {status}"))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            try:
                return (await http.request(client, "the API", "GET", "/x", answers=answers)).status_code
            except BackendUnavailable as exc:
                assert f"the API answered {status}: status {status}" in str(exc)
                return -1
    return asyncio.run(go())


@pytest.mark.parametrize("status", [200, 201, 400, 401, 403, 404, 422])
def test_an_answer_is_returned(status):
    assert answer(status) == status


@pytest.mark.parametrize("status", [429, 500, 501, 502, 503, 504])
def test_slow_down_and_server_errors_mean_ask_again_later(status):
    assert answer(status) == -1


def test_a_status_the_api_declares_an_answer_is_returned():
    assert answer(500, answers=(500, 501)) == 500
    assert answer(501, answers=(500, 501)) == 501
    assert answer(502, answers=(500, 501)) == -1
    assert answer(429, answers=(500, 501)) == -1


def test_an_unreachable_api_means_ask_again_later():
    async def go() -> str:
        def refuse(request: httpx.Request) -> httpx.Response:
            raise httpx.ConnectError("connection refused", request=request)
        async with httpx.AsyncClient(transport=httpx.MockTransport(refuse), base_url="http://api") as client:
            with pytest.raises(BackendUnavailable) as caught:
                await http.request(client, "the API", "GET", "/x")
            return str(caught.value)
    assert asyncio.run(go()) == "the API is unreachable: connection refused"


def test_the_two_backends_differ_only_in_the_declared_answers():
    """Buildkite's 500 is an outage; slurmrestd's 500 carries its refusal, so a poll reads it as a lost job."""
    async def go() -> tuple[str, object]:
        transport = httpx.MockTransport(lambda request: httpx.Response(500, json={"jobs": [], "errors": []}))
        buildkite = BuildkiteBackend(BuildkiteConfig(organization="o", pipeline="p"), ("q",), None, 1.0)
        slurm = SlurmBackend(SlurmConfig(url="http://slurm", user="u", shared_dir="/tmp"), "gpu", None, 1.0)
        buildkite._http = httpx.AsyncClient(transport=transport, base_url="http://buildkite")
        slurm._http = httpx.AsyncClient(transport=transport, base_url="http://slurm")
        with pytest.raises(BackendUnavailable) as caught:
            await buildkite._request("GET", "/builds")
        return str(caught.value), await slurm.poll("42")
    refused, outcome = asyncio.run(go())
    assert refused.startswith("Buildkite answered 500")
    assert isinstance(outcome, JobLost) and outcome.retryable and "unknown to slurmrestd (500)" in outcome.detail
