"""The Modal backend, through the official `modal` client: spawn the deployed function of a GPU type.

deploy/modal/app.py deploys one class per GPU type (`RunT4.run`, `RunH100.run`, ...: containers keeping a warm
runner) and, for older catalogues, one function (`run_t4`, ...). A launch spawns it with the
payload and the launch key and keeps the call id (the job reference), from which any process can poll, collect
or cancel the call. Modal cannot list calls by a key, so idempotence lives in the deployed function: it claims its
launch key in a modal.Dict and, when the key was claimed by an earlier call, returns `{"duplicate_of": <call id>}`
at once; this backend then follows the earlier call. So a second spawn after a crash never runs the work twice.

The seam for tests is the two lookups `modal.Function.from_name` and `modal.FunctionCall.from_id`; everything
after them is modal's own API (`spawn.aio`, `object_id`, `get.aio(timeout=0)`, `cancel.aio`, modal's exceptions).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

import modal
import modal.exception as modal_errors

from schemas.contracts import RunPayload
from services.dispatcher.backends.base import PENDING, BackendUnavailable, JobLost, LaunchError, Outcome
from services.dispatcher.backends.results import parse_result

log = logging.getLogger("kernelbot.dispatcher.modal")

DUPLICATE_KEY = "duplicate_of"
TRANSIENT = (modal_errors.ConnectionError, modal_errors.InternalError, modal_errors.ServiceError,
             modal_errors.ResourceExhaustedError, OSError)


def modal_lookups(spec: str) -> tuple[Callable[..., Any], Callable[[str], Any], Callable[..., Any]]:
    """modal's own lookups (function, call, class), or those of the object named by `spec` ("module:attr")."""
    if not spec:
        return modal.Function.from_name, modal.FunctionCall.from_id, modal.Cls.from_name
    module, _, attr = spec.partition(":")
    stand_in = getattr(importlib.import_module(module), attr)
    return stand_in.from_name, stand_in.from_id, stand_in.cls_from_name


class ModalBackend:
    name = "modal"

    def __init__(self, app: str, function: str, poll_interval_s: float, *, environment: str | None = None,
                 from_name: Callable[..., Any] = modal.Function.from_name,
                 from_id: Callable[[str], Any] = modal.FunctionCall.from_id,
                 cls_from_name: Callable[..., Any] = modal.Cls.from_name) -> None:
        self.app = app
        self.function = function
        self.environment = environment
        self.poll_interval_s = poll_interval_s
        self._from_name = from_name
        self._from_id = from_id
        self._cls_from_name = cls_from_name

    def _target(self):
        """The deployed function, or for `Class.method` the method of the class (whose containers keep a warm
        runner, deploy/modal/app.py)."""
        if "." in self.function:
            cls_name, _, method = self.function.partition(".")
            return getattr(self._cls_from_name(self.app, cls_name, environment_name=self.environment)(), method)
        return self._from_name(self.app, self.function, environment_name=self.environment)

    async def launch(self, payload: RunPayload, launch_key: str) -> str:
        function = self._target()
        try:
            call = await function.spawn.aio(payload.model_dump(mode="json"), launch_key)
        except modal_errors.NotFoundError as exc:
            raise LaunchError(f"Modal has no function {self.function} in app {self.app}: run "
                              f"`modal deploy deploy/modal/app.py`") from exc
        except modal_errors.AuthError as exc:
            raise LaunchError(f"Modal refused our credentials: {exc}; set MODAL_TOKEN_ID/MODAL_TOKEN_SECRET") from exc
        except TRANSIENT as exc:
            raise BackendUnavailable(f"Modal is unreachable: {exc}") from exc
        except modal_errors.Error as exc:
            raise LaunchError(f"Modal refused the call: {exc}") from exc
        return call.object_id

    async def poll(self, job_ref: str) -> Outcome:
        where = f"Modal call {job_ref} of {self.app}.{self.function}"
        try:
            value = await self._from_id(job_ref).get.aio(timeout=0)
        except modal_errors.OutputExpiredError:
            return JobLost("lost", f"{where}: its result expired before it was collected", retryable=True)
        except modal_errors.FunctionTimeoutError:
            return JobLost("timeout", f"{where} ran past the function's timeout on Modal")
        except modal_errors.TimeoutError:
            return PENDING
        except modal_errors.NotFoundError:
            return JobLost("lost", f"{where} is unknown to Modal", retryable=True)
        except TRANSIENT as exc:
            raise BackendUnavailable(f"Modal is unreachable: {exc}") from exc
        except (modal_errors.Error, modal_errors.InputCancellation) as exc:
            return JobLost("runner_error", f"{where} failed: {type(exc).__name__}: {exc}", retryable=True)
        if isinstance(value, dict) and DUPLICATE_KEY in value:
            return await self.poll(str(value[DUPLICATE_KEY]))  # an earlier spawn of this launch key does the work
        if value is None:
            return JobLost("lost", f"{where} returned no result", retryable=True)
        return parse_result(value, where)

    async def cancel(self, job_ref: str) -> None:
        try:
            await self._from_id(job_ref).cancel.aio(terminate_containers=True)
        except modal_errors.Error as exc:
            log.warning("cancelling %s: %s", job_ref, exc)
