"""The gateway keeps no CLI id: registration records its digest, and the id popcorn-cli presents is hashed before
every lookup (the poll's one read, the auth dependency, the web sign-in). The digest itself opens nothing."""

from __future__ import annotations

import asyncio

from schemas.credentials import cli_id_hash
from services.core.readmodel import poll_reads
from services.kit.db import create_pool
from tests.gateway.conftest import CODE, cli, new_user
from tests.support.events import archived, query
from tests.support.oauth_platform import hidden_fields
from tests.support.platform import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def polled(database_url: str, presented: str, submission_id: int):
    pool = await create_pool(database_url, 1)
    try:
        return await poll_reads.poll(pool, presented, submission_id)
    finally:
        await pool.close()


def test_registration_keeps_the_digest_and_the_clear_id_submits_and_polls(gateway):
    user_id, cli_id = new_user(gateway)

    [row] = query(gateway.database_url, "SELECT to_jsonb(u) AS row FROM users u WHERE user_id = $1", user_id)
    assert cli_id not in str(row) and cli_id_hash(cli_id) in str(row)
    [event] = [e for e in archived(gateway.database_url, "CliUserRegistered") if e["user_id"] == user_id]
    assert "cli_id" not in event and event["cli_id_sha256"] == cli_id_hash(cli_id)
    assert cli_id not in event["event_id"]

    accepted = gateway.submit(cli_id, "open", "null", "leaderboard", CODE)
    assert accepted.status_code == 202, accepted.text
    submission_id = accepted.json()["details"]["id"]
    assert gateway.wait_done(cli_id, submission_id, timeout=60)["user_id"] == user_id
    # the poll's one read finds the caller by the presented id, not by what is stored
    assert asyncio.run(polled(gateway.database_url, cli_id, submission_id))["caller_id"] == user_id
    assert asyncio.run(polled(gateway.database_url, cli_id_hash(cli_id), submission_id)) is None

    digest = cli_id_hash(cli_id)
    assert gateway.http.get(f"/user/submissions/{submission_id}", headers=cli(cli_id)).status_code == 200
    assert gateway.http.get(f"/user/submissions/{submission_id}", headers=cli(digest)).status_code == 401
    assert gateway.http.get("/user/submissions", headers=cli(digest)).status_code == 401
    assert gateway.submit(digest, "open", "null", "leaderboard", CODE).status_code == 401


def test_web_sign_in_takes_the_clear_id_and_ends_with_it(gateway):
    user_id, cli_id = new_user(gateway)
    form = hidden_fields(gateway.http.get("/web/login").text)  # the form token, as a browser would post it
    with_digest = gateway.http.post("/web/login", data={**form, "cli_id": cli_id_hash(cli_id)},
                                    follow_redirects=False)
    assert with_digest.status_code == 401

    signed_in = gateway.http.post("/web/login", data={**form, "cli_id": cli_id, "next": "/web/submissions"},
                                  follow_redirects=False)
    assert signed_in.status_code == 303, signed_in.text
    cookie = signed_in.cookies["kb_session"]
    gateway.http.cookies.clear()
    assert cli_id not in cookie and cli_id_hash(cli_id) not in cookie

    browser = gateway.client(cookies={"kb_session": cookie})

    def page_status() -> int:
        return browser.get("/web/submissions", follow_redirects=False).status_code

    assert page_status() == 200
    # the operator gives the user a new id: the session opened with the old one ends with it
    renewed = gateway.http.post("/admin/users", json={"user_id": user_id, "user_name": f"user{user_id}"},
                                headers=ADMIN)
    assert renewed.status_code == 200
    new_id = renewed.json()["cli_id"]
    gateway.wait_for(lambda: gateway.http.get("/user/submissions", headers=cli(new_id)).status_code == 200,
                     "the new id")
    assert gateway.http.get("/user/submissions", headers=cli(cli_id)).status_code == 401
    assert page_status() != 200
    browser.close()


def test_an_operator_chosen_id_is_refused_for_a_second_user_by_its_digest(gateway):
    chosen = "operator-chosen-id-for-atrest-test"
    first = gateway.http.post("/admin/users", json={"user_id": "7990", "user_name": "first", "cli_id": chosen},
                              headers=ADMIN)
    assert first.status_code == 200 and first.json()["cli_id"] == chosen
    gateway.wait_for(lambda: gateway.http.get("/user/submissions", headers=cli(chosen)).status_code == 200,
                     "the chosen id")
    second = gateway.http.post("/admin/users", json={"user_id": "7991", "user_name": "second", "cli_id": chosen},
                               headers=ADMIN)
    assert (second.status_code, second.json()["detail"]) == (400, "cli_id already in use")
