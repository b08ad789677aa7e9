"""An embedded Postgres server, from the pgserver wheel (which also copes with running as root)."""

from __future__ import annotations

import atexit
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from services.kit.embedded.common import _log_tail


class EmbeddedPostgres:
    """A Postgres server from the pgserver wheel; data lives in data_dir/pgdata and survives stop/start.

    pgserver runs Postgres as an unprivileged `pgserver` user when we are root (Postgres refuses root), and
    listens only on a unix socket, so `url` is a libpq URL naming the socket directory.
    """

    def __init__(self, data_dir: Path, *, stop_at_exit: bool = True) -> None:
        self.data_dir = Path(data_dir)
        self.pgdata = self.data_dir / "pgdata"
        self.stop_at_exit = stop_at_exit
        self._server: Any = None  # pgserver.PostgresServer while running
        self._url: str | None = None

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("embedded Postgres is not running")
        return self._url

    @property
    def log_path(self) -> Path:
        return self.pgdata / "log"

    @property
    def pid(self) -> int | None:
        return self._server.get_pid() if self._server is not None else None

    def is_running(self) -> bool:
        info = _postmaster_info(self.pgdata)
        return info is not None and info.is_running()

    def start(self) -> None:
        if self._server is not None:
            return
        pgserver = _import_pgserver()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            # cleanup_mode='stop': never 'delete' -- the data must outlive us.
            server = pgserver.get_server(self.pgdata, cleanup_mode="stop")
        except Exception as exc:
            raise RuntimeError(
                f"embedded Postgres failed to start in {self.pgdata}: {exc!r}. Log tail:\n{_log_tail(self.log_path)}"
            ) from exc
        # pgserver shares one server between processes and stops it when the last *recorded* pid lets go;
        # a crashed earlier run leaves its pid recorded, which would keep the server alive forever.
        # So we take ownership of the lifecycle: drop pgserver's exit hook and stop it ourselves.
        atexit.unregister(server._cleanup)
        self._server = server
        self._url = _socket_url(server.get_postmaster_info())
        if self.stop_at_exit:
            atexit.register(self.stop)

    def stop(self) -> None:
        """Stop the server (fast shutdown: sessions are ended, committed data is kept)."""
        server, self._server = self._server, None
        atexit.unregister(self.stop)
        if server is None:
            return
        from pgserver import pg_ctl  # type: ignore[attr-defined]  # pgserver makes its commands at import time

        with server._lock:
            server.global_process_id_list.get_and_remove(os.getpid())
            # Forget the cached handle, or the next get_server() returns it without starting anything.
            type(server)._instances.pop(server.pgdata, None)
            info = _postmaster_info(self.pgdata)
            if info is not None and info.is_running():
                pg_ctl(["-w", "-t", "60", "-m", "fast", "stop"], pgdata=self.pgdata, user=server.system_user)

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> EmbeddedPostgres:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"EmbeddedPostgres(url={self._url!r}, pgdata={str(self.pgdata)!r})"


def _import_pgserver() -> Any:
    # Importing pgserver computes a runtime dir and warns when XDG_RUNTIME_DIR is unset (servers, containers);
    # it then falls back to a tmp dir, which is fine for us.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
        import pgserver.postgres_server as pgserver_module
    if not getattr(pgserver_module.find_suitable_socket_dir, "_kb_patched", False):
        pgserver_module.find_suitable_socket_dir = _socket_dir_finder(  # type: ignore[assignment]  # our patch
            pgserver_module.find_suitable_socket_dir)
    return pgserver


def _socket_dir_finder(original: Callable[[Path, Path], Path]) -> Callable[[Path, Path], Path]:
    """pgserver passes the socket dir to postgres as an unquoted `-o "-k DIR"`, so a DIR with a space
    (macOS "Application Support", "/Users/Jane Doe") makes postgres refuse to start. Such a data dir
    gets its socket in a short hashed dir under a space-free runtime/tmp dir instead."""
    import hashlib
    import tempfile

    def find(pgdata: Path, runtime_path: Path) -> Path:
        chosen = original(pgdata, runtime_path)
        if not re.search(r"\s", str(chosen)):
            return chosen
        base = runtime_path if not re.search(r"\s", str(runtime_path)) else Path(tempfile.gettempdir())
        if re.search(r"\s", str(base)):
            raise RuntimeError(f"no socket directory without whitespace available for {pgdata}")
        digest = hashlib.sha256(f"{pgdata}-{pgdata.stat().st_ino}".encode()).hexdigest()[:10]
        socket_dir = base / f"kb-pg-{digest}"
        socket_dir.mkdir(parents=True, exist_ok=True)
        return socket_dir

    find._kb_patched = True  # type: ignore[attr-defined]
    return find


def _postmaster_info(pgdata: Path) -> Any:
    from pgserver.utils import PostmasterInfo

    return PostmasterInfo.read_from_pgdata(pgdata)


def _socket_url(info: Any, database: str = "postgres") -> str:
    """libpq URL for a unix-socket server, accepted by asyncpg and psycopg alike.

    Built by hand rather than with pgserver's get_uri(): the socket dir is percent-encoded (paths may hold
    spaces) and the port is explicit, so a PGPORT in the environment cannot point us at the wrong socket.
    """
    if info.socket_dir is None:
        return f"postgresql://postgres@{info.hostname}:{info.port}/{database}"
    return f"postgresql://postgres@/{database}?host={quote(str(info.socket_dir), safe='/')}&port={info.port}"


def start_postgres(data_dir: Path, *, stop_at_exit: bool = True) -> EmbeddedPostgres:
    """Start (initialising on first use) a Postgres server whose data lives under data_dir.

    Reuses a server already running on the same data dir. Stopped at interpreter exit unless
    stop_at_exit=False; the data is never deleted.
    """
    server = EmbeddedPostgres(data_dir, stop_at_exit=stop_at_exit)
    server.start()
    return server


