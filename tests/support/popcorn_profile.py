"""popcorn-cli's `submit --profile` on the wire, as its newest release sends and reads it: the test oracle of the
profile route (docs/quickstart.md, "Profiling"; checked against gpu-mode/popcorn-cli `src/profile.rs` and
`src/service/mod.rs`).

What the client sends
---------------------
`POST {POPCORN_API_URL}/profile/{leaderboard, lower-cased}/{gpu}`, through reqwest with its default headers: the
`X-Popcorn-Cli-Id` identity, `Accept: */*`, and `Content-Type: multipart/form-data; boundary=...` (four groups of 16
hex digits joined by `-`, CRLF line ends). The parts:

* `file`: the submission's bytes, with its file name and no content type of its own.
* One text part per capture option the user gave, and none for an option not given (a null is never sent):
  `benchmark_index` (an unsigned integer in decimal: which benchmark case; absent, every case),
  `ncu_kernel_name` (a string: a kernel name, or `regex:` and a pattern),
  `ncu_kernel_name_base` (`function`, `demangled` or `mangled`: the client's flag allows no other value),
  `ncu_launch_count` (an unsigned integer, the client refuses 0 itself; absent, the server's default of 10).
  The CLI flags are `--benchmark-index`, `--ncu-kernel-name`, `--ncu-kernel-name-base` and `--ncu-launch-count`,
  beside `--profile` (or `--mode profile`).

A non-2xx answer is an error: the client prints the JSON body's `detail` (the whole body when it has none).

What the client reads
---------------------
A `text/event-stream` body, split on blank lines, each message's `event:` and last `data:` line; every network chunk
is decoded on its own (so the JSON must be ASCII). `status` events print their `message`; unknown events are noted
and skipped; `error` ends the run with its `detail` (default "Unknown server error"), `status_code` and `raw_error`
when present. The first `result` event is handed to its profile saver, which checks, in this order:

* `results`: a non-empty array, else "Server returned no profiling results".
* For each result: `success` must be the boolean true (missing or null fails: "Profiling failed: <error>");
  `runs` a non-empty object (else "Server returned no profile runs"). `system` and `profile_metadata` are copied into
  the saved `manifest.json` as they are; missing ones are written as null without complaint, so their presence is
  checked here, not by the client. In upstream's `profile_metadata` the client's own test reads `config_sha256` (a
  string) and `capture_options` (an object of the options given).
* For each run of `runs` (every key, not only `profile.*`): `compilation.success` false fails it with the
  compiler's stderr; `run.success` false fails it with the run's stderr (a missing `compilation` or `run` is no
  failure); `profile.trace` must be a string (missing or null: "No NCU report was produced"), decoded as standard
  base64 with padding (invalid: "Server returned an invalid profile archive", which aborts at once), opened as a zip
  (else "Failed to read profile artifact"), and must hold at least one entry ending in `.ncu-rep` (else "NCU
  archive contains no .ncu-rep report"). Entries ending `.ncu-rep`, `ncu-details.txt` or `ncu-details.csv` are
  extracted. `run.result["benchmark.0.spec"]` names the case in its summary ("unknown benchmark" when missing).
  It never follows `profile.download_url` or `artifacts`.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import secrets
import zipfile

import httpx

EXTRACTED = (".ncu-rep", "ncu-details.txt", "ncu-details.csv")  # what the CLI keeps of an artifact's zip
CLI_OPTIONS = ("benchmark_index", "ncu_kernel_name", "ncu_kernel_name_base", "ncu_launch_count")


class ClientRefused(AssertionError):
    """What popcorn-cli would print as its error instead of saving the profile."""


def boundary() -> str:
    return "-".join(secrets.token_hex(8) for _ in range(4))


def multipart_body(mark: str, file_name: str, content: bytes, fields: list[tuple[str, str]]) -> bytes:
    parts = [f'--{mark}\r\nContent-Disposition: form-data; name="file"; filename="{file_name}"\r\n\r\n'.encode()
             + content + b"\r\n"]
    for name, value in fields:
        parts.append(f'--{mark}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    return b"".join(parts) + f"--{mark}--\r\n".encode()


def profile_request(cli_id: str, file_name: str, content: bytes, **options: int | str | None) -> tuple[dict, bytes]:
    """(headers, body) of the CLI's request; options left out (or None) are not sent at all. Names other than the
    CLI's own (our earlier `kernel_name`, `launch_count`, or a made-up one) travel the same way, after them."""
    fields = [(name, str(options[name])) for name in CLI_OPTIONS if options.get(name) is not None]
    fields += [(name, str(value)) for name, value in options.items() if name not in CLI_OPTIONS and value is not None]
    mark = boundary()
    body = multipart_body(mark, file_name, content, fields)
    headers = {"X-Popcorn-Cli-Id": cli_id, "Content-Type": f"multipart/form-data; boundary={mark}",
               "Accept": "*/*", "Content-Length": str(len(body))}
    return headers, body


def read_stream(response: httpx.Response) -> tuple[list[str], str, dict]:
    """(status messages, final event name, its data) as the CLI's loop reads the SSE body."""
    assert response.headers["content-type"].startswith("text/event-stream"), response.headers
    buffer, statuses = "", []
    for chunk in response.iter_bytes():
        buffer += chunk.decode("utf-8", errors="replace")  # chunk by chunk, as String::from_utf8_lossy
        while "\n\n" in buffer:
            message, buffer = buffer.split("\n\n", 1)
            event = data = None
            for line in message.splitlines():
                if line.startswith("event:"):
                    event = line.removeprefix("event:").strip()
                elif line.startswith("data:"):
                    data = line.removeprefix("data:").strip()
            if event == "status" and data is not None:
                statuses.append(json.loads(data).get("message", data))
            elif event in ("result", "error") and data is not None:
                return statuses, event, json.loads(data)
    raise AssertionError("Stream ended unexpectedly without a final result or error event.")


def extract(zip_bytes: bytes, kept: tuple[str, ...] = EXTRACTED) -> dict[str, bytes]:
    """The artifact's files the CLI keeps, by base name."""
    with zipfile.ZipFile(io.BytesIO(zip_bytes)) as archive:
        return {name.rsplit("/", 1)[-1]: archive.read(name) for name in archive.namelist() if name.endswith(kept)}


def _run_failure(run: dict) -> str | None:
    compilation = run.get("compilation")
    if isinstance(compilation, dict) and compilation.get("success") is False:
        return f"Compilation failed:\n{compilation.get('stderr') or 'No compiler error was reported'}"
    executed = run.get("run")
    if isinstance(executed, dict) and executed.get("success") is False:
        return f"Execution failed:\n{executed.get('stderr') or 'No execution error was reported'}"
    return None


def save_hosted_results(answer: dict) -> list[dict]:
    """What the CLI saves of a `result` event: per result its manifest (`system`, `profile_metadata`) and per run
    the spec and the extracted files; raises ClientRefused with the CLI's message where the CLI fails."""
    results = answer.get("results")
    if not isinstance(results, list) or not results:
        raise ClientRefused("Server returned no profiling results")
    saved = []
    for result in results:
        if result.get("success") is not True:
            raise ClientRefused(f"Profiling failed: {json.dumps(result.get('error'))}")
        runs = result.get("runs")
        if not isinstance(runs, dict) or not runs:
            raise ClientRefused("Server returned no profile runs")
        failures, cases = [], {}
        for key, run in runs.items():
            reason = _run_failure(run)
            if reason:
                failures.append(f"{key}: {reason}")
            trace = (run.get("profile") or {}).get("trace") if isinstance(run.get("profile"), dict) else None
            if not isinstance(trace, str):
                failures.append(f"{key}: No NCU report was produced")
                continue
            try:
                data = base64.b64decode(trace, validate=True)
            except (binascii.Error, ValueError):
                raise ClientRefused("Server returned an invalid profile archive") from None
            try:
                files = extract(data)
            except zipfile.BadZipFile as exc:
                raise ClientRefused(f"Failed to read profile artifact: {exc}") from None
            if not any(name.endswith(".ncu-rep") for name in files):
                failures.append(f"{key}: NCU archive contains no .ncu-rep report")
            spec = ((run.get("run") or {}).get("result") or {}).get("benchmark.0.spec")
            cases[key] = {"spec": spec if isinstance(spec, str) else "unknown benchmark", "files": files}
        if failures:
            raise ClientRefused("\n".join(failures))
        saved.append({"manifest": {"system": result.get("system"), "profile_metadata": result.get("profile_metadata")},
                      "runs": cases})
    return saved
