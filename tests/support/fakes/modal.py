"""A fake of Modal for the dispatcher, at the narrowest seam the `modal` client allows.

Modal's client speaks gRPC to Modal's servers with pickled arguments, so it cannot be pointed at a local HTTP
fake. The seam is the two lookups the backend uses, `modal.Function.from_name` and `modal.FunctionCall.from_id`
(setting KB_MODAL_CLIENT=tests.support.fakes.modal:stand_in). They return objects with modal's own surface
(`spawn.aio`, `object_id`, `get.aio(timeout=0)`, `cancel.aio`) raising modal's own exceptions, and they talk over
HTTP to `FakeModal`, a control plane run by the test: it holds the calls and runs them like the deployed app in
deploy/modal/app.py, including its claim of the launch key (a second spawn of a key returns `duplicate_of`).
"""

from __future__ import annotations

import itertools
import json
import os

import httpx
import modal.exception as modal_errors

from runner.task.payload import encode_payload
from schemas.contracts import RunPayload
from tests.support.fakes.http import FakeServer, Reply, Request
from tests.support.fakes.jobs import FakeJob, FakeJobs, answer_lost, behaviour_of

URL_ENV = "KB_FAKE_MODAL_URL"


class FakeModal(FakeServer):
    """Modal's side: the deployed functions of one app and their calls."""

    def __init__(self, app: str = "kernelbot-runners", functions: tuple[str, ...] = ("run_fake", "RunFake.run")) -> None:
        super().__init__()
        self.app = app
        self.functions = set(functions)
        self.jobs = FakeJobs()
        self.calls: dict[str, FakeJob | str] = {}  # call id -> job, or the call id it duplicates
        self.claims: dict[str, str] = {}  # launch key -> call id (the deployed app's modal.Dict)
        self._ids = itertools.count(1)
        self.route("POST", "/spawn", self._spawn)
        self.route("GET", "/calls/(?P<call>[^/]+)", self._get)
        self.route("POST", "/calls/(?P<call>[^/]+)/cancel", self._cancel)

    def _spawn(self, request: Request) -> Reply:
        body = request.json()
        if body["app"] != self.app or body["function"] not in self.functions:
            return Reply(404, {"error": f"Function {body['app']}.{body['function']} not found"})
        payload, key = body["args"]
        if behaviour_of(RunPayload.model_validate(payload)) == "refused":  # as if its function was never deployed
            return Reply(404, {"error": f"Function {body['app']}.{body['function']} not found"})
        call_id = f"fc-{next(self._ids):06d}"
        with self.lock:
            if key in self.claims:
                self.calls[call_id] = self.claims[key]
            else:
                self.claims[key] = call_id
                self.calls[call_id] = self.jobs.start(encode_payload(RunPayload.model_validate(payload)), key)
                if answer_lost(self.calls[call_id]):
                    return Reply(503, {"error": "the call was made but its answer was lost"})
        return Reply(200, {"call_id": call_id})

    def _get(self, request: Request) -> Reply:
        call = self.calls.get(request.params["call"])
        if isinstance(call, str):
            return Reply(200, {"state": "done", "value": {"duplicate_of": call}})
        if call is None or call.lost:
            return Reply(404, {"error": "function call not found"})
        if call.state == "done":
            value = None if call.result is None else json.loads(call.result)
            return Reply(200, {"state": "done", "value": value})
        return Reply(200, {"state": call.state})

    def _cancel(self, request: Request) -> Reply:
        call = self.calls.get(request.params["call"])
        if isinstance(call, FakeJob):
            self.jobs.cancel(call)
        return Reply(200, {})


# --- the dispatcher's side: stand-ins for modal.Function / modal.FunctionCall -----------------------------------


class _Method:
    """Modal's methods are callable and carry an `.aio` coroutine variant; the backend uses `.aio`."""

    def __init__(self, coroutine_function) -> None:
        self.aio = coroutine_function


def _url() -> str:
    return os.environ[URL_ENV]


class FakeFunctionCall:
    def __init__(self, call_id: str) -> None:
        self.object_id = call_id
        self.get = _Method(self._get)
        self.cancel = _Method(self._cancel)

    async def _get(self, timeout: float | None = None):
        async with httpx.AsyncClient() as http:
            response = await http.get(f"{_url()}/calls/{self.object_id}")
        if response.status_code == 404:
            raise modal_errors.NotFoundError(f"FunctionCall {self.object_id} not found")
        state = response.json()
        if state["state"] == "cancelled":
            raise modal_errors.InputCancellation("the input was cancelled")
        if state["state"] != "done":
            raise modal_errors.TimeoutError("no output yet")
        return state["value"]

    async def _cancel(self, terminate_containers: bool = False) -> None:
        async with httpx.AsyncClient() as http:
            await http.post(f"{_url()}/calls/{self.object_id}/cancel")


class FakeFunction:
    def __init__(self, app: str, name: str) -> None:
        self.app, self.name = app, name
        self.spawn = _Method(self._spawn)

    async def _spawn(self, *args):
        async with httpx.AsyncClient() as http:
            response = await http.post(f"{_url()}/spawn", json={"app": self.app, "function": self.name,
                                                                  "args": list(args)})
        if response.status_code == 404:
            raise modal_errors.NotFoundError(response.json()["error"])
        if response.status_code >= 500:
            raise modal_errors.InternalError(response.json()["error"])
        return FakeFunctionCall(response.json()["call_id"])


class _StandIn:
    @staticmethod
    def from_name(app_name: str, name: str, *, environment_name: str | None = None) -> FakeFunction:
        return FakeFunction(app_name, name)

    @staticmethod
    def from_id(function_call_id: str) -> FakeFunctionCall:
        return FakeFunctionCall(function_call_id)

    @staticmethod
    def cls_from_name(app_name: str, name: str, *, environment_name: str | None = None):
        """modal.Cls.from_name: instances whose methods spawn as `Class.method` in the fake's app."""
        class FakeInstance:
            def __getattr__(self, method: str) -> FakeFunction:
                return FakeFunction(app_name, f"{name}.{method}")

        return FakeInstance


stand_in = _StandIn()
