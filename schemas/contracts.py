"""The task, run-payload and run-result contracts shared by dispatcher, runner and scorer (harness.md §1.3, §3)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SUBMISSION_MARKER = "@SUBMISSION@"

Lang = Literal["py", "cu"]
RankingBy = Literal["last", "mean", "geom"]
Mode = Literal["test", "benchmark", "profile", "leaderboard", "private"]
UserMode = Literal["test", "benchmark", "profile", "leaderboard"]
CaseValue = int | str | list[int]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class PyConfig(_Frozen):
    main: str


class CuConfig(_Frozen):
    sources: list[str]
    include_dirs: list[str] = []
    defines: dict[str, str] = {}
    compile_flags: list[str] = []


class Task(_Frozen):
    """A problem in its stored form: the task minus description, templates and gpus.

    `files` maps each run-directory file name to its inlined content; the submission's file holds
    the literal `@SUBMISSION@` until a payload is built.
    """

    lang: Lang
    files: dict[str, str]
    config: PyConfig | CuConfig
    libraries: list[str] = []
    tests: list[dict[str, CaseValue]] = []
    test_timeout: int = 180
    benchmarks: list[dict[str, CaseValue]] = []
    benchmark_timeout: int = 180
    ranked_timeout: int = 180
    ranking_by: RankingBy = "last"
    seed: int | None = None
    multi_gpu: bool = False

    @property
    def submission_file(self) -> str:
        return next(name for name, content in self.files.items() if content == SUBMISSION_MARKER)


class RunPayload(_Frozen):
    """What the dispatcher sends to a runner for one run (harness.md §3.1)."""

    run_id: str
    gpu: str
    secret: bool = False
    lang: Lang
    mode: Mode
    arch: str | None = None
    tests: list[dict[str, CaseValue]] = []
    benchmarks: list[dict[str, CaseValue]] = []
    test_timeout: int = 180
    benchmark_timeout: int = 180
    ranked_timeout: int = 180
    ranking_by: RankingBy = "last"
    seed: int | None = None
    multi_gpu: bool = False
    main: str | None = None
    sources: dict[str, str] = {}
    headers: dict[str, str] = {}
    defines: dict[str, str] = {}
    include_dirs: list[str] = []
    compile_flags: list[str] = []


class SystemInfo(_Frozen):
    gpu: str = ""
    device_count: int = 0
    cpu: str = ""
    runtime: str = ""
    platform: str = ""
    torch: str = ""
    hostname: str = ""


class CompileResult(_Frozen):
    nvcc_found: bool = True
    nvcc_version: str = ""
    success: bool
    command: str = ""
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


class RunResult(_Frozen):
    success: bool
    passed: bool
    command: str = ""
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    duration: float = 0.0
    result: dict[str, str] = {}


class ProfileResult(_Frozen):
    profiler: str
    trace: str = ""
    download_url: str | None = None


class EvalResult(_Frozen):
    start: str | None = None
    end: str | None = None
    compilation: CompileResult | None = None
    run: RunResult | None = None
    profile: ProfileResult | None = None
    harness: dict[str, str] = {}
    samples: dict[str, Any] = {}
    # When the stage's process started, wrote its first and last result line, and ended (ISO-8601 UTC): where the
    # time outside the harness's own loop goes; `start` is `warm` (forked from a warm runner) or `cold`.
    timing: dict[str, str] = {}


class FullResult(_Frozen):
    success: bool
    error: str = ""
    system: SystemInfo = Field(default_factory=SystemInfo)
    runs: dict[str, EvalResult] = {}
    # When the runner process started and when its result was ready (ISO-8601 UTC).
    timing: dict[str, str] = {}
