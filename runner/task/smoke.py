"""The onboarding guide's smoke test payload: `{"lang": "py", "mode": "test", "files": {"main.py":
"print(\"Hello GPU!\")"}, "tests": [], "benchmarks": []}`, sent to the runner image by a vendor to see it run.

It has no run identity, names its files `files` (not `sources`) and has no `main` and no checker. The runner fills
the rest in and judges it by what it can judge: the program ran and exited 0. A payload that names its run
(`run_id`) is a real run: no defaults, the whole contract (docs/authoring.md).
"""

from __future__ import annotations

from schemas.contracts import FullResult

SMOKE_RUN_ID = "smoke-test"
SMOKE_MAIN = "main.py"


def is_smoke_payload(obj: dict) -> bool:
    return "run_id" not in obj and isinstance(obj.get("files"), dict)


def with_smoke_defaults(obj: dict) -> dict:
    """The guide's minimal payload made a full one (run_id, gpu, main, sources); any other payload unchanged."""
    if not is_smoke_payload(obj):
        return obj
    rest = {key: value for key, value in obj.items() if key != "files"}
    files = obj["files"]
    python_files = sorted(name for name in files if name.endswith(".py"))
    main = obj.get("main") or (SMOKE_MAIN if SMOKE_MAIN in files or not python_files else python_files[0])
    return {"run_id": SMOKE_RUN_ID, "gpu": SMOKE_RUN_ID, **rest, "main": main,
            "sources": {**files, **(obj.get("sources") or {})}}


def judged(result: FullResult) -> FullResult:
    """A smoke run has no checker: each stage passed when its program ran and exited 0."""
    runs = {}
    for key, stage in result.runs.items():
        run = stage.run
        if run is not None:
            run = run.model_copy(update={"passed": run.success and run.exit_code == 0})
        runs[key] = stage.model_copy(update={"run": run})
    return result.model_copy(update={"runs": runs})


def summary(result: FullResult) -> str:
    """One line for the vendor's terminal."""
    where = f"{result.system.gpu or 'no GPU'} ({result.system.runtime or 'unknown runtime'}, " \
            f"{result.system.device_count} visible)"
    if not result.success:
        return f"smoke test FAILED on {where}: {result.error}"
    stage = next(iter(result.runs.values()), None)
    run = stage.run if stage is not None else None
    if run is None:
        compiled = stage.compilation if stage is not None else None
        return f"smoke test FAILED on {where}: nothing ran" + (f" ({compiled.stderr.strip()[:200]})" if compiled else "")
    output = run.stdout.strip().replace("\n", " | ")[:200]
    verdict = "passed" if run.passed else f"FAILED (exit {run.exit_code}: {run.stderr.strip()[-200:]})"
    return f"smoke test {verdict} on {where}: stdout {output!r}"
