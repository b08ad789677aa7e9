"""`Idempotency-Key` on the submit routes: a client that retries after losing the answer (a gateway killed between
recording a submission and replying, a dropped connection) gets the submission its first attempt made."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.gateway.conftest import CODE, cli, new_user


def _submit(gateway, cli_id: str, key: str | None, mode: str = "test"):
    headers = cli(cli_id) | ({"Idempotency-Key": key} if key is not None else {})
    return gateway.http.post(f"/submission/open/null/{mode}", headers=headers,
                             files={"file": ("k.py", CODE.encode())})


def _own_ids(gateway, cli_id: str) -> list[int]:
    return sorted(entry["id"] for entry in gateway.http.get("/user/submissions", headers=cli(cli_id)).json())


def test_a_retry_with_the_same_key_is_the_same_submission(gateway):
    _, cli_id = new_user(gateway)
    first = _submit(gateway, cli_id, "attempt-1")
    assert first.status_code == 202, first.text
    submission_id = first.json()["details"]["id"]
    gateway.wait_done(cli_id, submission_id)

    again = _submit(gateway, cli_id, "attempt-1")
    assert again.status_code == 202 and again.json()["details"]["id"] == submission_id
    other = _submit(gateway, cli_id, "attempt-2")
    assert other.status_code == 202 and other.json()["details"]["id"] != submission_id
    without = _submit(gateway, cli_id, None)
    assert without.json()["details"]["id"] not in (submission_id, other.json()["details"]["id"])
    gateway.wait_done(cli_id, other.json()["details"]["id"])
    gateway.wait_done(cli_id, without.json()["details"]["id"])
    assert len(_own_ids(gateway, cli_id)) == 3


def test_retries_racing_each_other_make_one_submission_and_keys_belong_to_their_user(gateway):
    _, alice = new_user(gateway)
    _, bob = new_user(gateway)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: _submit(gateway, alice, "same-key"), range(4)))
    assert all(a.status_code == 202 for a in answers), [a.text for a in answers]
    ids = {a.json()["details"]["id"] for a in answers}
    assert len(ids) == 1
    [submission_id] = ids
    gateway.wait_done(alice, submission_id)
    assert _own_ids(gateway, alice) == [submission_id]

    bobs = _submit(gateway, bob, "same-key")  # another user's key space
    assert bobs.status_code == 202 and bobs.json()["details"]["id"] != submission_id
    gateway.wait_done(bob, bobs.json()["details"]["id"])


def test_a_malformed_key_is_refused_before_anything_is_recorded(gateway):
    _, cli_id = new_user(gateway)
    for key in ("", "x" * 256, "with space", "naïve"):
        response = gateway.http.post("/submission/open/null/test",
                                     headers=cli(cli_id) | {"Idempotency-Key": key.encode()},
                                     files={"file": ("k.py", CODE.encode())})
        assert (response.status_code, response.json()) == (
            400, {"detail": "Idempotency-Key must be 1 to 255 printable ASCII characters"}), key
    assert _own_ids(gateway, cli_id) == []


def test_a_key_whose_submission_was_deleted_is_not_reused(gateway):
    _, cli_id = new_user(gateway)
    submission_id = _submit(gateway, cli_id, "gone").json()["details"]["id"]
    gateway.wait_done(cli_id, submission_id)
    deleted = gateway.http.delete(f"/user/submissions/{submission_id}", headers=cli(cli_id))
    assert deleted.status_code == 200, deleted.text

    again = _submit(gateway, cli_id, "gone")
    assert (again.status_code, again.json()) == (
        409, {"detail": "The submission of this Idempotency-Key was deleted"})
    assert _own_ids(gateway, cli_id) == []
