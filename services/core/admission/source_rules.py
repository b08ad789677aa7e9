"""Rules read from a submission's source text (docs/http-api.md "Submitting", steps 14-15): the stream filter and
`#!POPCORN` directives. Pure; raised as the policy's refusals."""

from __future__ import annotations

import re

from services.core.admission.refusal import refuse

STREAM_WORK = ("Your code contains work on another stream. This is not allowed and may result in your "
               "disqualification. If you think this is a mistake, please contact us.")
RUDE_FILE_NAME = "Please provide a non-rude filename"
DIRECTIVE_TOKENS = ("#!POPCORN", "//!POPCORN")
DIRECTIVE_KEYS = {"leaderboard": "leaderboard", "gpus": "gpus", "gpu": "gpus"}

_IDENTIFIER = re.compile(r"[A-Za-z0-9_]+")
# Whole words only, so `class.py`, `assemble.cu` and `scunthorpe.py` pass; digits standing for letters are read back.
_RUDE_WORDS = frozenset({
    "arse", "arsehole", "ass", "asshole", "bastard", "bitch", "bollocks", "bullshit", "cock", "crap", "cunt", "dick",
    "dickhead", "fag", "faggot", "fuck", "fucked", "fucker", "fucking", "motherfucker", "nigga", "nigger", "piss",
    "prick", "pussy", "retard", "shit", "shitty", "slut", "twat", "wank", "wanker", "whore",
})
_LEET = str.maketrans("0134578@$", "oieastbas")
# camel-case boundaries: lower/digit -> upper, and upper -> upper+lower (`CUDAStream` is `CUDA` + `Stream`)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def identifier_words(token: str) -> list[str]:
    """The lower-cased words of an identifier, split at `_` and at camel-case boundaries."""
    return [word.lower() for part in token.split("_") for word in _CAMEL.split(part) if word]


def check_polite_file_name(file_name: str) -> None:
    """Step 11: no word of the file name is a profanity."""
    for token in _IDENTIFIER.findall(file_name.translate(_LEET)):
        if any(word in _RUDE_WORDS for word in identifier_words(token)):
            refuse(400, RUDE_FILE_NAME)


def check_streams(code: str) -> None:
    """Step 14: no identifier (comments and strings included) names a stream, except reading the current one.

    Reading the stream the harness times on (`getCurrentCUDAStream()`, `torch.cuda.current_stream()`) is allowed
    (docs/http-api.md "Submitting", step 14): only creating or switching streams would move work off the timed stream.
    """
    for token in _IDENTIFIER.findall(code):
        words = identifier_words(token)
        if ("stream" in words or "streams" in words) and "current" not in words:
            refuse(400, STREAM_WORK)


def header_directives(code: str) -> dict[str, list[str]]:
    """Step 15: `#!POPCORN` / `//!POPCORN` lines of the leading comment block, by key (values after the key)."""
    found: dict[str, list[str]] = {}
    for line in code.splitlines():
        if not line.startswith(("//", "#")):
            break
        tokens = line.split()
        if not tokens or tokens[0] not in DIRECTIVE_TOKENS:
            continue
        if len(tokens) < 3:
            refuse(400, f"!POPCORN directive missing argument: {line}")
        key = DIRECTIVE_KEYS.get(tokens[1].lower())
        if key is None:
            refuse(400, f"Invalid !POPCORN directive: {tokens[1].lower()}")
        if key in found or (key == "leaderboard" and len(tokens) > 3):
            refuse(400, f"Found multiple values for !POPCORN directive {key}")
        found[key] = tokens[2:]
    return found


def check_directives(code: str, leaderboard: str) -> None:
    """A `leaderboard` directive must name the submitted-to leaderboard (case-insensitively); `gpus` is ignored on
    HTTP routes, where the path names the GPU."""
    named = header_directives(code).get("leaderboard")
    if named and named[0].lower() != leaderboard.lower():
        refuse(400, f"Leaderboard name `{leaderboard}` specified in the command doesn't match the one in the "
                    f"submission script header `{named[0]}`.")
