"""Reading a runner's result.json as a remote backend hands it back."""

from __future__ import annotations

import io
import json
import zipfile

from pydantic import ValidationError

from schemas.contracts import FullResult
from services.dispatcher.backends.base import JobLost

RESULT_FILE = "result.json"


def parse_result(data: bytes | str | dict, where: str) -> FullResult | JobLost:
    """The FullResult in `data`, or a retryable loss that says where the unreadable result came from."""
    try:
        value = json.loads(data) if isinstance(data, bytes | str) else data
        return FullResult.model_validate(value)
    except (ValueError, ValidationError) as exc:
        return JobLost("runner_error", f"the result from {where} is not a runner result: {exc}"[:2000],
                       retryable=True)


def result_from_zip(archive: bytes, where: str) -> FullResult | JobLost:
    """The result.json inside an artifact archive (GitHub zips every artifact)."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as bundle:
            names = [n for n in bundle.namelist() if n.rsplit("/", 1)[-1] == RESULT_FILE]
            if not names:
                return JobLost("lost", f"{where} holds no {RESULT_FILE}; the runner did not finish", retryable=True)
            return parse_result(bundle.read(names[0]), where)
    except zipfile.BadZipFile as exc:
        return JobLost("lost", f"{where} is not a zip archive: {exc}", retryable=True)
