"""Fixtures of the service tier (tests/support/service_tier.py): a database cloned per test from the migrated
template (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.cloned_database import cloned


@pytest.fixture
def service_database(postgres_server_url: str, migrated_template: str) -> Iterator[str]:
    """A fresh, migrated database for this test only: a copy of the template."""
    with cloned(postgres_server_url, migrated_template, "kb_service") as url:
        yield url
