"""Migrations at start-up (services/kit/db.apply_migrations), as several services apply them at once: one migrator at
a time under a Postgres session lock, which dies with its holder; a database that is away is waited for."""

from __future__ import annotations

import threading

import psycopg

from services.kit.db import apply_migrations


def _applied(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT count(*) FROM _yoyo_migration").fetchone()[0]


def test_a_lock_left_by_a_migrator_that_died_stops_no_later_start(database_url):
    assert apply_migrations(database_url) > 0
    with psycopg.connect(database_url) as conn:  # yoyo's lock row of a process killed while it migrated
        conn.execute("INSERT INTO yoyo_lock (locked, ctime, pid) VALUES (1, now(), 999999)")
    assert apply_migrations(database_url) == 0  # yoyo alone waited 10 s, then failed with LockTimeout
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM yoyo_lock").fetchone()[0] == 0


def test_services_starting_together_each_apply_or_find_every_migration(database_url):
    results: list[int | BaseException] = []

    def start() -> None:
        try:
            results.append(apply_migrations(database_url))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            results.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results, key=str)[:3] == [0, 0, 0] and results.count(0) == 3, results  # one applied them all
    assert max(r for r in results if isinstance(r, int)) == _applied(database_url)


def test_a_database_away_at_start_up_is_waited_for(postgres_server, database_url):
    postgres_server.stop()
    done: list[int] = []
    migrating = threading.Thread(target=lambda: done.append(apply_migrations(database_url)))
    migrating.start()
    migrating.join(1.0)
    assert migrating.is_alive()  # still trying: the service has not died of the outage
    postgres_server.start()
    migrating.join(60)
    assert done and done[0] == _applied(database_url) > 0
