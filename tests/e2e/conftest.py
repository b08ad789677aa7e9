from __future__ import annotations

import pytest

from tests.support.platform import Platform


@pytest.fixture
def platform(nats_url: str, database_url: str, tmp_path):
    running = Platform(nats_url, database_url, tmp_path)
    running.start()
    yield running
    running.stop()
