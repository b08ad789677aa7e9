"""The JSON bodies of the policy routes, as pydantic models, read the way the routes always answered them.

A route takes the body as any JSON (`JsonBody`) and reads it with `read()`: a body that is no JSON object reads as an
empty one, and the first field the model refuses answers with that field's documented 400 (docs/http-api.md). So
FastAPI never answers a 422 for a well-formed JSON body, and a route still decides what it checks first (a board that
does not exist is a 404 before its body is looked at). `documented()` shows the model in OpenAPI as the body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from fastapi import Body, HTTPException
from pydantic import (
    BaseModel,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)

Model = TypeVar("Model", bound=BaseModel)
JsonBody = Annotated[Any, Body()]
MAX_INT = 2**31 - 1
MAX_INVITES = 10_000

# A usable JSON string: not empty, and no NUL (Postgres text holds none).
Text = Annotated[str, StringConstraints(strict=True, min_length=1, pattern=r"^[^\x00]*$")]


def _or_none(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A field the route falls back from when it is unusable: read as absent instead of refused."""
    try:
        return handler(value)
    except ValidationError:
        return None


def read(model: type[Model], body: Any, refusals: Mapping[str, str]) -> Model:
    """`body` as `model`, or the 400 of the first field it refuses (`refusals` by field name, in the model's order)."""
    try:
        return model.model_validate(body if isinstance(body, dict) else {})
    except ValidationError as error:
        location = error.errors()[0]["loc"]
        name = str(location[0]) if location else next(iter(refusals))
        raise HTTPException(400, refusals[name]) from None


def documented(model: type[BaseModel]) -> dict[str, Any]:
    """The route's `openapi_extra`: the model is the JSON body OpenAPI shows."""
    return {"requestBody": {"content": {"application/json": {"schema": model.model_json_schema()}}}}


class VisibilityChange(BaseModel):
    visibility: Literal["public", "closed"]


VISIBILITY_REFUSALS = {"visibility": "visibility must be 'public' or 'closed'"}


class RateLimitChange(BaseModel):
    mode_category: Literal["test", "leaderboard"]
    max_submissions_per_hour: StrictInt = Field(ge=0, le=MAX_INT)


RATE_LIMIT_REFUSALS = {"mode_category": "mode_category must be 'test' or 'leaderboard'",
                       "max_submissions_per_hour": "max_submissions_per_hour must be a non-negative integer"}


class NewInvites(BaseModel):
    """`count` codes for every leaderboard of `leaderboards`, or for `leaderboard` alone when that list is unusable."""

    count: StrictInt = Field(ge=1, le=MAX_INVITES)
    leaderboards: Annotated[Annotated[list[Text], Field(min_length=1)] | None, WrapValidator(_or_none)] = None
    leaderboard: Annotated[Text | None, WrapValidator(_or_none)] = None

    def names(self) -> list[str] | None:
        return self.leaderboards or ([self.leaderboard] if self.leaderboard else None)


INVITES_REFUSALS = {"count": f"count must be an integer between 1 and {MAX_INVITES}"}
NO_BOARDS = "Must provide 'leaderboards' list or 'leaderboard' string"


class InviteClaim(BaseModel):
    code: StrictStr


JOIN_REFUSALS = {"code": "Missing required field: code"}


class VerdictClearing(BaseModel):
    reason: Annotated[str, StringConstraints(strict=True, pattern=r"^[^\x00]*$")] | None = None


CLEARING_REFUSALS = {"reason": "reason must be a string"}


def _as_sent(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A field checked later, by the use case, after what the route checks first: kept as sent when it is unusable,
    so the use case's own refusal answers it."""
    try:
        return handler(value)
    except ValidationError:
        return value


class PrecheckPolicyChange(BaseModel):
    """Outcomes by rule name (`refuse`, `hacked`, `warn` or `off`); rules not named keep their default."""

    outcomes: Annotated[dict[str, Literal["refuse", "hacked", "warn", "off"]] | None, WrapValidator(_as_sent)] = None


class HuggingFaceExport(BaseModel):
    leaderboard_ids: Annotated[list[StrictInt] | None, WrapValidator(_as_sent)] = None
    filename: Annotated[StrictStr | None, WrapValidator(_as_sent)] = None
    private: Annotated[StrictBool | None, WrapValidator(_as_sent)] = None  # anything but false exports privately
    ranked_only: Annotated[StrictBool | None, WrapValidator(_as_sent)] = None
