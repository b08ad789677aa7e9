from __future__ import annotations

import pytest

from tests.support.in_process import InProcessPlatform


@pytest.fixture
def platform(nats_url: str, database_url: str, tmp_path):
    running = InProcessPlatform(nats_url, database_url, tmp_path)
    running.start()
    yield running
    running.stop()
