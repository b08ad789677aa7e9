"""The runner: load problems, build payloads and execute them with the task harness (docs/authoring.md).

Rooms (docs/architecture.md, "Runner rooms"); each may import only the rooms above it in this list:

task/          what a run is: files and payloads, no processes (imports no other room)
  taskfile       task.yml loading and validation, case-line rendering, task hash
  taskcheck      the field validators taskfile uses
  sources        a problem's files read from its directory (task.yml's `files`, the validation block's)
  validation_block task.yml's `validation:` block in both of upstream's forms, checked
  competition    competition files (problems/<set>.yaml): the problem list of one problem set
  payload        RunPayload construction and the base64(zlib(json)) transport encoding
  smoke          the onboarding guide's smoke test payload and its one-line verdict
  protocol       POPCORN_FD result parsing, tamper rules, output truncation
  harness_choice which harness judges a run (ours in place of a known stock eval.py)
  stock_versions the reference-kernels eval.py versions our harness knows, by SHA-256
  toolchain      the runner images' toolchain manifests (data in runner/toolchains/*.toml)
  profiling      the text of a profile stage's report
host/          facts about this host (imports no other room)
  sysinfo        SystemInfo collection without importing torch
  nvml           NVML: the GPUs' fingerprint and their clock/thermal telemetry
  rocm_devices   AMD GPUs as ROCm lists them, and the device nodes of one (`python -m runner.host.rocm_devices`)
confinement/   what confines a run's processes (imports no other room)
  sandbox        per-run directory, uid and limits; the run's sandbox level
  bwrap          the full sandbox: one bubblewrap sandbox per run, which every process joins
  sandbox_init   PID 1 inside that sandbox (run from its file, standard library only)
  confine        applied to each process before exec (run from its file, standard library only)
  seccomp        the seccomp filter of the run sandbox
  run_uids       the dedicated uid of each run when the runner is root
  environment    the scrubbed environment handed to user code
launching/     starting the processes of a run (imports confinement)
  process        one process: pipes drained concurrently, process-group timeout kill
  chain          all stages of a run in one harness process (the chain extension of the protocol)
  starter        each process of a run started warm or cold, confined either way
  warm_client    the runner's side of the warm runner: ask it for a fork
  warm_child     the child side: turn a fresh fork into the process a cold start gives
profilers/     profile mode's capture tools, each answering in one shape (imports task)
  base           what every external capture tool provides to the profile stage
  ncu            Nsight Compute on CUDA hosts
  rocprof        rocprofv3 on ROCm hosts
  torch_table    torch.profiler's key-averages table as CSV (the CPU host's profiler)
  bundle         one profiled case as a zip with its manifest
stages/        a run from payload to FullResult, and what is measured on the way (imports all rooms above)
  execute        the runner procedure: sandbox, prepare, then the stages one process each or chained
  prepare        files written, then the warm-up (py) or the compile (cu); the harness environment
  stage          one stage's plan, case file and EvalResult
  chained        the stages in one harness process, as EvalResults
  profile_stage  profile mode's stages: the chosen cases under the host's profiler, each answered as a zip
  cuda           the nvcc compile step
  cuda_supervisor the second compile of a supervised CUDA harness
  compile_cache  a CUDA submission's binary kept for its other runs on this host
  telemetry      GPU telemetry around timed stages
  timing         the stamps of a run's phases (EvalResult.timing, FullResult.timing)
conformance/   `kernelbot conformance`: the checks a vendor runs on a runner host (imports every room above)
  checks         the checks, one function each, and the run over all of them
  pytasks        the Python-harness side: small tasks built in memory around our harness
  runs           submissions run through stages/execute, and the CUDA harness built once for timing runs
  report         one line per check and the summary line
Entry points, the modules at the top (imported by no room; their `python -m` names are what hosts run):
  __main__       `python -m runner`: execute one payload and write result.json
  container      `python -m runner.container`: the runner image's entry point
  agent          `python -m runner.agent`: a GPU host's runner agent on NATS
  report         `python -m runner.report`: publish a finished run's result
  warm           `python -m runner.warm`: the warm runner, a fork server holding torch imported

Nothing here imports services/; torch is never imported in the runner process (the warm runner imports it, and
never touches a GPU or runs user code).
"""
