"""Test infrastructure: where the suite's Postgres and NATS come from.

Preference, for each: a server named by env var (KB_DATABASE_URL / KB_NATS_URL), else a testcontainers
container when the package is installed and a Docker engine answers, else an embedded server started here.
So a fresh clone with no Docker and no servers still runs the whole suite.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.launching.warm_client import WarmLauncher
from services.kit.embedded import (
    EmbeddedNats,
    create_database,
    drop_database,
    render_nats_config,
    start_nats,
    start_postgres,
)
from services.kit.embedded.common import _run_sync
from tests.support import children, cloned_database
from tests.support.events import delete_all_streams
from tests.support.warm import warm_runner


def pytest_configure(config: pytest.Config) -> None:
    # Registered here, not in pyproject, so the marker exists however pytest is invoked.
    config.addinivalue_line("markers", "slow: a scenario of several seconds or more, left out unless -m slow (README.md)")
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped on hosts without one (tests/gpu)")


# ------------------------------------------------------------------------------------------ leftovers


def _runs_tests(config: pytest.Config) -> bool:
    """A worker, or a run without xdist; a controller of workers starts nothing itself."""
    return hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)


def pytest_sessionstart(session: pytest.Session) -> None:
    # Every process this one starts carries its mark, also the ones a test starts with a plain Popen; a worker
    # replaces its controller's.
    os.environ[children.SPAWNED_BY] = str(os.getpid())


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """No test leaves a process behind: whatever the session started and is still alive fails the run (a worker
    hands its list to the controller, which reports it), and is killed."""
    config = session.config
    if _runs_tests(config):
        alive = children.settle_leftovers()
        if hasattr(config, "workerinput"):
            config.workeroutput["leftover_processes"] = alive  # type: ignore[attr-defined]
        else:
            _LEFTOVERS.update(alive)
    if _LEFTOVERS:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_LEFTOVERS: dict[int, str] = {}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    _LEFTOVERS.update(getattr(node, "workeroutput", {}).get("leftover_processes", {}))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _LEFTOVERS:
        terminalreporter.section("processes left running (killed now)", red=True)
        for pid, command in sorted(_LEFTOVERS.items()):
            terminalreporter.line(f"{pid}: {command}")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker per core, at most 4; each worker starts its own Postgres and NATS servers."""
    return max(1, min(4, os.cpu_count() or 1))


# Packages whose tests share one platform (a package-scoped fixture of their conftest.py).
SHARED_PLATFORM_PACKAGES = ("tests/discord", "tests/gateway")


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadfile`, except that a package sharing a platform goes to one worker whole. xdist hands out files
    biggest first, which interleaves packages on a worker; pytest tears a package's fixtures down whenever the next
    test is in another package, so the shared platform was started again for nearly every file of its package."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # only where xdist runs the suite: `-n 0` needs no scheduler

    class SharedPlatformScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            package = path.rsplit("/", 1)[0]
            return package if package in SHARED_PLATFORM_PACKAGES else path

    return SharedPlatformScheduling(config, log)


# ------------------------------------------------------------------------------------------ docker probe


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # the parent package itself is missing
        return False


@functools.cache
def _docker_answers() -> bool:
    """True only if a Docker engine responds; never raises (no docker package, no socket, no daemon)."""
    if not _importable("docker"):
        return False
    try:
        import docker

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - any failure means "no Docker here"
        return False


def _container_available(module: str) -> bool:
    return _importable(module) and _docker_answers()


# -------------------------------------------------------------------------------------------- postgres


_embedded_postgres: list = []  # the session's own server, when it started one


@pytest.fixture(scope="session")
def postgres_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a Postgres server the tests may create and drop databases on."""
    external = os.environ.get("KB_DATABASE_URL")
    if external:
        yield external
        return
    if _container_available("testcontainers.postgres"):
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16-alpine") as container:
            # Its URL carries a SQLAlchemy driver suffix; create_database() normalises the scheme.
            yield container.get_connection_url()
        return
    with start_postgres(tmp_path_factory.mktemp("postgres")) as server:
        _embedded_postgres.append(server)
        yield server.url
        _embedded_postgres.clear()


@pytest.fixture(scope="session")
def migrated_template(postgres_server_url: str) -> Iterator[str]:
    """The name of a migrated database that tests clone (tests/support/cloned_database.py)."""
    with cloned_database.migrated_template(postgres_server_url) as name:
        yield name


@pytest.fixture
def postgres_server(postgres_server_url: str):
    """The session's embedded Postgres, for tests that restart it; skipped when the server is not ours."""
    if not _embedded_postgres:
        pytest.skip("an external Postgres is in use (KB_DATABASE_URL or Docker); it cannot be restarted by the test")
    return _embedded_postgres[0]


@pytest.fixture
def database_url(postgres_server_url: str) -> Iterator[str]:
    """A fresh, empty database for this test only; dropped afterwards."""
    name = f"kb_test_{uuid.uuid4().hex[:16]}"
    url = create_database(postgres_server_url, name)
    yield url
    try:
        drop_database(postgres_server_url, name)  # ends lingering sessions first
    except Exception as exc:  # noqa: BLE001 - a leftover test database must not fail the test
        warnings.warn(f"could not drop test database {name}: {exc!r}", stacklevel=1)


# ------------------------------------------------------------------------------------------------ NATS




@pytest.fixture(scope="session")
def _external_nats_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str | None]:
    """A NATS shared by the whole session, or None when each test gets its own embedded server."""
    external = os.environ.get("KB_NATS_URL")
    if external:
        yield external
        return
    if _container_available("testcontainers.nats"):
        from testcontainers.nats import NatsContainer

        # Same limits as the embedded server (8 MiB payloads), via a mounted config file.
        config_dir = tmp_path_factory.mktemp("nats-container")
        config_dir.chmod(0o755)
        (config_dir / "nats.conf").write_text(
            render_nats_config(host="0.0.0.0", port=4222, store_dir="/tmp/jetstream")
        )
        container = (
            NatsContainer("nats:2.10-alpine")
            .with_volume_mapping(str(config_dir), "/etc/kb-nats", "ro")
            .with_command("-c /etc/kb-nats/nats.conf")
        )
        with container:
            host, port = container.get_container_host_ip(), container.get_exposed_port(4222)
            yield f"nats://{host}:{port}"
        return
    yield None


@pytest.fixture
def nats_server(_external_nats_url: str | None, tmp_path: Path) -> Iterator[EmbeddedNats]:
    """This test's own embedded NATS, for tests that stop or restart it."""
    if _external_nats_url is not None:
        pytest.skip("an external NATS is in use (KB_NATS_URL or Docker); it cannot be restarted by the test")
    with start_nats(tmp_path / "nats") as server:
        yield server


@pytest.fixture
def nats_url(request: pytest.FixtureRequest, _external_nats_url: str | None) -> str:
    """URL of a NATS with JetStream and no streams left over from other tests."""
    if _external_nats_url is None:
        return request.getfixturevalue("nats_server").url
    _run_sync(lambda: delete_all_streams(_external_nats_url))
    return _external_nats_url


# ------------------------------------------------------------------------------------------- temp files


@pytest.fixture
def own_tmpdir() -> Iterator[Path]:
    """A TMPDIR for this test's subprocesses, made like /tmp (world-writable, sticky) so sandboxed run uids can use
    it; checks for leftover temporary files look here and never see another test's files (tests run in parallel)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="kb-test-tmp-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# ----------------------------------------------------------------------------------------------- runners


@pytest.fixture(scope="session")
def warm_launcher() -> Iterator[WarmLauncher]:
    """A warm runner (runner/warm.py) for the suites that run many harnesses: every process of a run forks from it,
    holding torch already, as the local backend and the runner container run them, instead of cold starts that each
    import torch. One serves every run of a worker's session, as one serves every run of a host;
    tests/runner/test_warm_runner.py shows that nothing one run changes reaches the next. The cold path keeps its
    own suites (tests/exploits/test_exploits.py, tests/sandbox)."""
    with warm_runner() as (launcher, _):
        yield launcher
