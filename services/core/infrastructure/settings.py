"""Settings that more than one front end reads: the open data set on the Hugging Face Hub (the gateway's
and the bot's exports) and where problem repositories are downloaded from (their problem sync)."""

from __future__ import annotations

from pydantic import SecretStr

from services.kit.settings import ServiceSettings

# Where a repository branch's archive is downloaded from for a problem sync
# (docs/authoring.md "Loading problems onto a server").
PROBLEMS_ARCHIVE_URL = "https://codeload.github.com/{repository}/tar.gz/refs/heads/{branch}"
# The repository a problem sync reads when none is named (KB_PROBLEMS_REPOSITORY, upstream's PROBLEMS_REPO).
PROBLEMS_REPOSITORY = "gpu-mode/reference-kernels"


class HfExportSettings(ServiceSettings):
    """The open data set on the Hugging Face Hub (services/core/opendata/hf_export.py)."""

    hf_token: SecretStr | None = None
    hf_private_dataset: str = ""  # owner/name of the data set exports go to by default
    hf_public_dataset: str = ""  # where finished public leaderboards may be published
    # The Hub's URL; empty: huggingface_hub's default, which honours HF_ENDPOINT.
    hf_endpoint: str = ""
