"""Web pages for people: the leaderboards, a ranking per GPU with its plot, and a submission for its owner.

Server-rendered HTML under /web (GET pages never shadow an API route; the two forms post to two-segment paths,
which the three-segment streaming submit cannot match). Pages carry a Content-Security-Policy without scripts.
Ownership is proved once, by the OAuth callback or by entering the CLI id; then a signed cookie (web/session.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Cookie, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from services.core.presentation import reports, results, views
from services.core.readmodel import board_reads, queue_reads, submission_reads, user_reads
from services.gateway.deps import Cache, Pool, User
from services.gateway.web import HEADERS, board_page, csrf, pages_repository, render
from services.gateway.web.ranking_rows import shown as _shown
from services.gateway.web.session import cli_digest, close_session, open_session, signer
from services.gateway.web.stats import format_seconds

router = APIRouter(include_in_schema=False)


def page(request: Request, template: str, status: int = 200, **context: object) -> HTMLResponse:
    """A page; every page may hold a form (sign out in the header), so each carries a form token."""
    form = csrf.issue(request)
    response = HTMLResponse(render(template, csrf_token=form.token, **context), status_code=status, headers=HEADERS)
    csrf.attach(request, response, form)
    return response


def forged(request: Request) -> HTMLResponse:
    return page(request, "message.html", 403, viewer=None, heading="Form expired",
                message="This form was not sent from this site's own page. Reload the page and try again.")


async def viewer(request: Request, pool: Pool, kb_session: Annotated[str | None, Cookie()] = None) -> User | None:
    """The signed-in person, or None; a session dies with the CLI id it was opened with."""
    session = signer(request).read(kb_session) if kb_session else None
    if session is None:
        return None
    row = await pages_repository.session_user(pool, session.user_id)
    if row is None or not row["cli_id_sha256"] or cli_digest(row["cli_id_sha256"]) != session.cli_digest:
        return None
    return User(str(row["user_id"]), row["user_name"], False, False)


Viewer = Annotated[User | None, Depends(viewer)]


async def _can_see(pool, board, person: User | None) -> bool:
    if board["visibility"] == "public":
        return True
    return person is not None and await user_reads.has_invite(pool, person.user_id, board["id"])


def _not_found(request: Request, person: User | None, what: str) -> HTMLResponse:
    return page(request, "message.html", 404, viewer=person, heading="Not found", message=what)


@router.get("/")
async def home() -> RedirectResponse:
    return RedirectResponse("/web", status_code=307)


@router.get("/web")
async def leaderboards(request: Request, pool: Pool, person: Viewer):
    now = datetime.now(UTC)
    invited = await user_reads.invited_boards(pool, person.user_id) if person else set()
    boards = []
    for row in await board_reads.leaderboards(pool):
        if row["visibility"] != "public" and row["id"] not in invited:
            continue
        boards.append({
            "name": row["name"], "url": f"/web/leaderboards/{quote(row['name'], safe='')}",
            "gpus": sorted(row["gpus"]), "closed": row["visibility"] != "public", "deadline": _shown(row["deadline"]),
            "ended": row["deadline"] < now, "summary": (row["description"] or "").strip().split("\n\n")[0][:300],
        })
    return page(request, "leaderboards.html", viewer=person, boards=boards)


@router.get("/web/leaderboards/{name}")
async def leaderboard(name: str, request: Request, pool: Pool, cache: Cache, person: Viewer, gpu: str | None = None):
    board = await board_reads.board_page(pool, name, gpu)
    # a closed board is absent for whoever may not see it, not merely locked
    if board is None or not await _can_see(pool, board, person):
        return _not_found(request, person, f"There is no leaderboard named {name}.")
    gpu, version = await board_page.shown_gpu(pool, board, gpu)
    if gpu not in board["gpus"]:
        return _not_found(request, person, f"{board['name']} is not run on {gpu}.")
    return page(request, "leaderboard.html", viewer=person,
                **await board_page.context(pool, cache, board, gpu, version))


def _to_login(request: Request) -> RedirectResponse:
    return RedirectResponse(f"/web/login?next={quote(request.url.path, safe='/')}", status_code=303)


@router.get("/web/submissions")
async def my_submissions(request: Request, pool: Pool, person: Viewer):
    if person is None:
        return _to_login(request)
    rows = await pages_repository.my_submissions(pool, person.user_id, 200)
    submissions = [{**dict(row), "submitted": _shown(row["submitted_at"]),
                    "status": row["job_status"] or "received", "leaderboard_name": row["leaderboard_name"] or ""}
                   for row in rows]
    return page(request, "submissions.html", viewer=person, submissions=submissions)


@router.get("/web/submissions/{submission_id}")
async def submission(submission_id: int, request: Request, pool: Pool, person: Viewer):
    if person is None:
        return _to_login(request)
    row = await submission_reads.submission(pool, submission_id)
    # someone else's submission is indistinguishable from a missing one
    if row is None or str(row["user_id"]) != person.user_id:
        return _not_found(request, person, f"You have no submission {submission_id}.")
    # the API's view of it: secret runs carry no harness output (docs/http-api.md "A user's submissions")
    stages = await submission_reads.submission_runs(pool, submission_id)
    shown = views.submission(row, stages, None)
    # the report popcorn-cli prints, for each public run that ended (a secret run's would reveal its inputs)
    report = "\n\n".join(reports.report(o.gpu, o.backend, o.mode, secret=False, result=o.result) for o in
                          results.outcomes(await submission_reads.run_requests(pool, submission_id), stages,
                                           row["gpus"])
                          if not o.secret)
    waiting = ""
    if not row["done"] and row["gpus"]:
        gpu = row["gpus"][0]
        waiting = board_page.queue_text(views.runner_queue(gpu, await queue_reads.queue(pool, gpu, submission_id)))
        waiting = f"{gpu}: {waiting}" if waiting else ""
    runs = [{**run, "score_text": format_seconds(run["score"]) if run["score"] is not None else "",
             "result": run.get("result")} for run in shown["runs"]]
    return page(request, "submission.html", viewer=person, s=shown, runs=runs, submitted=_shown(row["submitted_at"]),
                waiting=waiting, report=report)


def _safe_next(target: str | None) -> str:
    """Only a page of this site: never an absolute or scheme-relative URL (an open redirect)."""
    if target and target.startswith("/web") and not target.startswith("//") and "\\" not in target:
        return target
    return "/web/submissions"


@router.get("/web/login")
async def login_form(request: Request, person: Viewer, next: str | None = None):
    return page(request, "login.html", viewer=person, error=None, next=_safe_next(next))


@router.post("/web/login")
async def login(request: Request, pool: Pool, cli_id: Annotated[str, Form()] = "",
                next: Annotated[str, Form()] = "", csrf_token: Annotated[str, Form()] = ""):
    if not csrf.valid(request, csrf_token):
        return forged(request)
    row = await user_reads.user_by_cli(pool, cli_id.strip()) if cli_id.strip() else None
    if row is None:
        return page(request, "login.html", 401, viewer=None, error="That CLI id belongs to no registered user.",
                    next=_safe_next(next))
    response = RedirectResponse(_safe_next(next), status_code=303)
    open_session(request, response, str(row["user_id"]), cli_id.strip())
    return response


@router.post("/web/logout")
async def logout(request: Request, csrf_token: Annotated[str, Form()] = ""):
    if not csrf.valid(request, csrf_token):
        return forged(request)
    response = RedirectResponse("/web", status_code=303)
    close_session(response)
    return response
