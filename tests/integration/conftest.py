from tests.e2e.conftest import platform  # noqa: F401 - the same running platform fixture
