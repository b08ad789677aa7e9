"""The task, run-payload and run-result contracts shared by dispatcher, runner and scorer (docs/authoring.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.task_validation import TaskValidation

SUBMISSION_MARKER = "@SUBMISSION@"

Lang = Literal["py", "cu"]
RankingBy = Literal["last", "mean", "geom"]
Mode = Literal["test", "benchmark", "profile", "leaderboard", "private"]
UserMode = Literal["test", "benchmark", "profile", "leaderboard"]
CaseValue = int | str | list[int]
# Which harness judges a Python problem: its own `config.main` ("problem", upstream's behaviour), or KernelBot's
# supervisor/worker harness in its place where the problem has the standard reference-kernels shape ("kernelbot",
# the default: a problem that does not fit keeps its own harness, marked unprotected).
HarnessChoice = Literal["problem", "kernelbot"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


# The number formats a roofline declaration may name: the GPU's peak for that format bounds its compute time.
Precision = Literal["fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp6", "fp4"]


class RooflineCase(_Frozen):
    """The least one benchmark case must move and compute (docs/authoring.md): with a GPU's peak bandwidth and
    compute it gives the case's roofline floor, the shortest time physics allows. `precision` names the format
    its operations use; without it the GPU's fastest format bounds them, the lowest (safest) floor."""

    bytes: int = Field(default=0, ge=0)
    flops: int = Field(default=0, ge=0)
    precision: Precision | None = None


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
    harness: HarnessChoice = "kernelbot"
    # One entry per benchmark, in order, when the author declares them: the roofline floor under every score.
    roofline: list[RooflineCase] = []
    # The problem's application validation (schemas/task_validation.py): stored and shown, run by nothing yet.
    validation: TaskValidation | None = None

    @property
    def submission_file(self) -> str:
        return next(name for name, content in self.files.items() if content == SUBMISSION_MARKER)


# A capture of more kernels than this is refused: each kernel is replayed once per counter pass.
MAX_PROFILE_LAUNCHES = 200
MAX_KERNEL_NAME = 1024  # upstream KernelBot's bound on `ncu_kernel_name`
KernelNameBase = Literal["function", "demangled", "mangled"]


class ProfileOptions(_Frozen):
    """What a profile request chooses (docs/quickstart.md, "Profiling"): the benchmark case (None: every case), a
    kernel-name filter (a name, or `regex:` and a pattern, as Nsight Compute's `--kernel-name` takes it), which form
    of the name the filter matches (Nsight Compute's `--kernel-name-base`; None: the tool's default, `function`), how
    many matching launches to capture and how many matching launches to pass over first."""

    benchmark_index: int | None = Field(default=None, ge=0)
    kernel_name: str | None = Field(default=None, min_length=1, max_length=MAX_KERNEL_NAME, pattern=r"^[^\x00]*$")
    kernel_name_base: KernelNameBase | None = None
    launch_count: int | None = Field(default=None, ge=1, le=MAX_PROFILE_LAUNCHES)
    launch_skip: int = Field(default=0, ge=0, le=100_000)

    def upstream_names(self) -> dict[str, int | str]:
        """The options as upstream KernelBot and popcorn-cli name them, the ones given only (its `to_dict`)."""
        named = {"benchmark_index": self.benchmark_index, "ncu_kernel_name": self.kernel_name,
                 "ncu_kernel_name_base": self.kernel_name_base, "ncu_launch_count": self.launch_count}
        return {name: value for name, value in named.items() if value is not None}


class RunPayload(_Frozen):
    """What the dispatcher sends to a runner for one run (docs/authoring.md)."""

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
    harness: HarnessChoice = "kernelbot"
    submission_file: str | None = None  # which of the files holds the user's code
    # `<family>:<manifest sha256>` of the runner image this run needs (runner/task/toolchain.py); the dispatcher fills
    # it for GPUs served by an image, and a runner built from another manifest refuses the run.
    toolchain: str | None = None
    profile: ProfileOptions | None = None  # profile mode's capture options


class GpuFingerprint(_Frozen):
    """One GPU as measured on (docs/authoring.md); None where the device or driver does not say."""

    index: int = 0
    name: str = ""
    uuid: str = ""
    driver: str = ""
    runtime_version: str = ""  # the CUDA version the driver supports, or the ROCm version
    sm_clock_mhz: int | None = None  # the application (locked) SM clock: what timed kernels run at
    memory_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    power_limit_w: float | None = None
    ecc: str = ""  # "enabled" | "disabled" | "" (not supported)
    memory_mib: int | None = None
    mig: str = ""  # "enabled" | "disabled" | ""


class CpuFingerprint(_Frozen):
    model: str = ""
    cores: int = 0
    governor: str = ""  # the cpufreq scaling governor of cpu0, "" where there is none
    frequency_mhz: float | None = None  # current frequency of cpu0 when measured
    max_frequency_mhz: float | None = None


class Fingerprint(_Frozen):
    """The hardware a result was measured on; `source` says who answered (nvml, nvidia-smi, amd-smi, rocm-smi, none)."""

    source: str = ""
    gpus: list[GpuFingerprint] = []
    cpu: CpuFingerprint = Field(default_factory=CpuFingerprint)


class SystemInfo(_Frozen):
    gpu: str = ""
    device_count: int = 0
    cpu: str = ""
    runtime: str = ""
    platform: str = ""
    torch: str = ""
    hostname: str = ""
    fingerprint: Fingerprint = Field(default_factory=Fingerprint)


class TelemetrySample(_Frozen):
    """One GPU's state at one moment (NVML), read outside the timed window."""

    index: int = 0
    temperature_c: int | None = None
    sm_clock_mhz: int | None = None
    memory_clock_mhz: int | None = None
    power_w: float | None = None
    throttle_reasons: list[str] = []  # slowdowns only (thermal, power, hardware); idle is not one


class StageTelemetry(_Frozen):
    """Telemetry around a timed stage: each GPU before and after; `throttled` when either saw a slowdown."""

    source: str = ""  # "nvml", or "" where no GPU telemetry exists (CPU hosts, no driver)
    before: list[TelemetrySample] = []
    after: list[TelemetrySample] = []
    throttled: bool = False
    throttle_reasons: list[str] = []


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
    telemetry: StageTelemetry | None = None  # timed stages (benchmark, leaderboard) only
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
    # How the runner confined the run's processes, written by the runner outside user code's reach: "full"
    # (namespaces, per-run uid, seccomp: docs/security.md) or "limits-only" (resource limits alone); "" from a
    # runner older than this field.
    isolation: str = ""
