"""A problem's application validation in its stored form (docs/authoring.md "Application validation"): a script the
problem owns that puts a ranked submission to work in a small real workload and reports how it fared.

Stored with the task and shown with it. Nothing here runs it: that is the validation runner's, which this platform
does not have yet.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

# The run-directory name of the script in the short form, as upstream KernelBot runs it.
SHORT_FORM_MAIN = "validation.py"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class ValidationSchedule(_Frozen):
    """When a scheduled sweep runs: each day at this local time."""

    hour: int = Field(ge=0, le=23)
    minute: int = Field(default=0, ge=0, le=59)
    timezone: str  # an IANA name, `America/Los_Angeles`


class TaskValidation(_Frozen):
    """Both forms of task.yml's `validation:` end up here.

    Short form (`version` and `script`): the run directory is the task's own files plus the script as
    `validation.py`, and everything else takes the defaults below. Long form: the block lists its own run directory
    (`files`, one of them the submission), names the entry point (`main`) and says how and when to run it.
    """

    version: str = Field(min_length=1)  # the contract version results are recorded under
    main: str = SHORT_FORM_MAIN  # the file the validation runs
    files: dict[str, str]  # run-directory name -> content, inlined; the submission's holds `@SUBMISSION@`
    includes_task_files: bool = False  # the short form: the task's files are in the run directory too
    name: str = ""
    timeout: int = Field(default=900, ge=1)  # seconds for one submission's validation
    top_k: int = Field(default=10, ge=1)  # how many of the best users' submissions a sweep validates
    max_concurrency: int = Field(default=2, ge=1)  # validations of one sweep running at once
    schedule: ValidationSchedule | None = None  # none: sweeps are started by hand
    settings: dict[str, JsonValue] = {}  # handed to the script as they are
    shapes: list[dict[str, JsonValue]] = []  # likewise

    @model_validator(mode="before")
    @classmethod
    def _upstream_stored_form(cls, data: Any) -> Any:
        # Upstream KernelBot stores the short form as `{"version": ..., "source": <the script's text>}`.
        if isinstance(data, dict) and "source" in data and "files" not in data:
            rest = {key: value for key, value in data.items() if key != "source"}
            return {**rest, "main": SHORT_FORM_MAIN, "files": {SHORT_FORM_MAIN: data["source"]},
                    "includes_task_files": True}
        return data
