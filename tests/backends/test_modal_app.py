"""The Modal app under deploy/modal/: a function per GPU type, and a launch key runs its payload only once."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.backends.test_launch_idempotence import identity_payload

APP = Path(__file__).resolve().parents[2] / "deploy" / "modal" / "app.py"
GPU_FUNCTIONS = ("run_t4", "run_l4", "run_a100", "run_h100", "run_b200", "run_l4x4")


class ClaimStore:
    """modal.Dict's put(skip_if_exists) / get, which the deployed function claims launch keys with."""

    def __init__(self) -> None:
        self.items: dict[str, str] = {}

    def put(self, key: str, value: str, *, skip_if_exists: bool = False) -> bool:
        if skip_if_exists and key in self.items:
            return False
        self.items[key] = value
        return True

    def get(self, key: str) -> str | None:
        return self.items.get(key)


@pytest.fixture
def modal_app(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("kernelbot_modal_app", APP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defining a Modal app talks to nobody
    monkeypatch.setattr(module, "launches", ClaimStore())
    # After each run the app removes what appeared in the container's /tmp; this host's /tmp is shared with other
    # work (tests/security/test_modal_container.py runs the sweep itself in a private /tmp).
    monkeypatch.setattr(module, "SHARED_WRITABLE_DIRS", (str(tmp_path),))
    return module


def test_there_is_a_function_for_each_gpu_type(modal_app):
    assert modal_app.app.name == "kernelbot-runners"
    for name in GPU_FUNCTIONS:
        assert isinstance(getattr(modal_app, name), modal_app.modal.Function)


def test_a_second_spawn_of_a_launch_key_points_at_the_first_call_instead_of_running(modal_app, monkeypatch):
    current = ["fc-first"]
    monkeypatch.setattr(modal_app.modal, "current_function_call_id", lambda: current[0])
    payload = identity_payload("9.T4.test").model_dump(mode="json")

    result = modal_app.execute(payload, "9.T4.test.1")
    assert result["success"] and result["runs"]["test"]["run"]["passed"]  # the real runner ran the payload

    current[0] = "fc-second"
    assert modal_app.execute(payload, "9.T4.test.1") == {"duplicate_of": "fc-first"}
    current[0] = "fc-first"  # Modal retrying the first call's input keeps its claim
    assert modal_app._claim("9.T4.test.1") is None


def test_each_gpu_type_has_a_class_whose_containers_keep_a_warm_runner(modal_app, monkeypatch):
    """`Run<GPU>.run` forks every run's processes from the warm runner its container started on entry."""
    from modal._partial_function import _find_callables_for_obj, _PartialFunctionFlags

    for name in ("RunT4", "RunL4", "RunA100", "RunH100", "RunB200", "RunL4x4"):
        assert isinstance(getattr(modal_app, name), modal_app.modal.Cls)
    monkeypatch.setattr(modal_app.modal, "current_function_call_id", lambda: "fc-warm")
    container = modal_app.WarmRunner()
    hooks = {flag: _find_callables_for_obj(container, flag) for flag in
             (_PartialFunctionFlags.ENTER_POST_SNAPSHOT, _PartialFunctionFlags.CALLABLE_INTERFACE,
              _PartialFunctionFlags.EXIT)}
    for hook in hooks[_PartialFunctionFlags.ENTER_POST_SNAPSHOT].values():
        hook()  # what Modal does when it starts the container
    try:
        server = container.server
        assert server.poll() is None
        run = hooks[_PartialFunctionFlags.CALLABLE_INTERFACE]["run"]
        result = run(identity_payload("9.T4.warm").model_dump(mode="json"), "9.T4.warm.1")
        assert result["success"] and result["runs"]["test"]["run"]["passed"], result
        assert result["runs"]["test"]["timing"]["start"] == "warm"
    finally:
        for hook in hooks[_PartialFunctionFlags.EXIT].values():
            hook()
    assert server.poll() is not None
