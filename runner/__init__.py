"""The runner: load problems, build payloads and execute them with the task harness (docs/authoring.md).

Modules:
  taskfile     task.yml loading and validation, case-line rendering, task hash
  payload      RunPayload construction and the base64(zlib(json)) transport encoding
  execute      the runner procedure (py and cu), returning a FullResult
  protocol     POPCORN_FD result parsing, tamper rules, output truncation
  process      running one harness process: pipes drained concurrently, process-group timeout kill
  environment  the scrubbed environment handed to user code
  sandbox      per-run directory, uid and limits; confine.py applies them to each process before exec
  profiling    the text of a profile stage's report
  profile_stage  profile mode's stages: the chosen cases under the host's profiler, each answered as a zip
  profilers    Nsight Compute, rocprofv3 and torch.profiler captures, and the zip with its manifest
  container    the runner image's entry point (payload in, result.json out, RunCompleted published)
  sysinfo      SystemInfo collection without importing torch
  cuda         the nvcc compile step
  warm         the warm runner: a fork server holding torch imported; warm_child turns a fork into a fresh
               process (confined, runpy), warm_client asks for one; launch picks warm or cold per process
  timing       the stamps of a run's phases (EvalResult.timing, FullResult.timing)

Nothing here imports services/; torch is never imported in the runner process (the warm runner imports it, and
never touches a GPU or runs user code).
"""
