"""Whose a submission is: a user reads and deletes only their own submissions."""

from __future__ import annotations

from fastapi import HTTPException

from services.core.readmodel import submission_reads


async def owned(pool, submission_id: int, user_id: str, verb: str):
    """The submission's row; 404 when there is none, 403 when it is someone else's."""
    row = await submission_reads.submission(pool, submission_id)
    if row is None:
        raise HTTPException(404, "Submission not found")
    if str(row["user_id"]) != user_id:
        raise HTTPException(403, f"Not authorized to {verb} this submission")
    return row
