"""`python -m runner --payload FILE [--result FILE]`: execute one payload and write result.json.

The payload comes from FILE (JSON or base64(zlib(json))) or, without --payload, from the SUBMISSION_PAYLOAD
environment variable. Because a payload may carry the secret seed, the file is deleted as soon as it is read, and
a payload given in the environment is first moved into a private file by one re-exec: unsetting a variable leaves
it in /proc/<pid>/environ, which the harness and user code (children, same user) could read.

The result is written atomically (temporary file + rename) so a collector never sees a half-written result.json.
Every harness, warm-up and compiler process runs in the sandbox of runner/confinement/sandbox.py (a bubblewrap sandbox
per run where the host allows user namespaces, else limits only) unless --no-sandbox is given.
Exit status: 0 when a result file was written (whatever it says), 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

from runner.confinement.sandbox import SandboxPolicy
from runner.launching.chain import chain_enabled
from runner.launching.warm_client import WarmLauncher
from runner.stages.execute import execute
from runner.task.payload import PayloadError, decode_payload
from schemas.contracts import FullResult

PAYLOAD_ENV = "SUBMISSION_PAYLOAD"


def read_payload_text(payload_file: Path | None) -> str:
    if payload_file is not None:
        try:
            return payload_file.read_text(encoding="utf-8")
        finally:
            payload_file.unlink(missing_ok=True)
    text = os.environ.pop(PAYLOAD_ENV, None)
    if text is None:
        raise PayloadError(f"no payload: pass --payload FILE or set {PAYLOAD_ENV}")
    return text


def reexec_with_payload_file(arguments: list[str]) -> NoReturn:
    handle, path = tempfile.mkstemp(prefix="kernelbot-payload-", suffix=".txt")  # mode 0600
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(os.environ.pop(PAYLOAD_ENV))
    os.execve(sys.executable, [sys.executable, "-m", "runner", "--payload", path, *arguments], dict(os.environ))


def write_result_atomically(result: FullResult, destination: Path) -> None:
    destination = destination.resolve()
    handle, temporary = tempfile.mkstemp(prefix=".result-", suffix=".json", dir=destination.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(result.model_dump_json(indent=2))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, destination)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner", description="Execute one KernelBot run payload.")
    parser.add_argument("--payload", type=Path, help=f"payload file (JSON or base64-zlib); default: ${PAYLOAD_ENV}")
    parser.add_argument("--result", type=Path, default=Path("result.json"), help="where to write the FullResult")
    parser.add_argument("--workdir", type=Path, default=None, help="parent of the temporary run directory")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run the harness unconfined (development only; see runner/confinement/sandbox.py)")
    parser.add_argument("--warm", type=Path, default=None,
                        help="socket of a warm runner (runner/warm.py) to fork the harness processes from")
    args = parser.parse_args(argv)
    try:
        payload = decode_payload(read_payload_text(args.payload))
    except (PayloadError, OSError) as exc:
        result = FullResult(success=False, error=f"invalid payload: {exc}")
    else:
        result = execute(payload, workdir=args.workdir, sandbox=None if args.no_sandbox else SandboxPolicy(),
                         warm=WarmLauncher(args.warm) if args.warm else None, chain=chain_enabled())
    try:
        write_result_atomically(result, args.result)
    except OSError as exc:
        print(f"cannot write {args.result}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if PAYLOAD_ENV in os.environ and not any(arg.startswith("--payload") for arg in sys.argv[1:]):
        reexec_with_payload_file(sys.argv[1:])
    sys.exit(main())
