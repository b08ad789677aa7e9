"""`kernelbot host-check`: a vendor's check, on the GPU host itself, that each Buildkite agent is isolated as the
onboarding guide promises (docs/vendors.md). One line per check, `OK` or `FAIL`, exit status 1 on any failure.

Per agent (one per /etc/buildkite-agent/agent-N/buildkite-agent.cfg): its queue tag, its unit (GPU variable, slice,
config; for an `amd-` queue HIP_ and ROCR_VISIBLE_DEVICES and the render node amd-smi and sysfs give its GPU),
whether it runs, the slice's cgroup limits in force against the ones its unit file asks for, and how many
GPUs a runner container started the way the pipeline starts it actually sees. Once for the host: the runner image.
The checks read files below `--root` (default /) and ask `systemctl` and `docker` from PATH.

Before the checks, one `INFO` line reports the isolation a runner started directly on this host gives its runs
(`full`, or `limits-only` and why: such runs are not ranked outside development mode). It is reported, not checked:
the agents' jobs run in the runner container, confined by its own sandbox. Two more `INFO` lines report the kernel
settings the sandbox stands on (services/cli/host_kernel.py): Yama's ptrace restriction and user-namespace support,
each with what it means here. `--json` prints everything as one JSON object, the isolation level and its reason and
the kernel settings included.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from runner.host import rocm_devices
from services.cli.host_kernel import kernel_settings

QUEUE = re.compile(r"[a-z0-9]+-[a-z0-9]+-[0-9]+")
UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
CPU_PERIOD_US = 100_000  # systemd's default CPUQuotaPeriodSec
RUNNER_IMAGE = "kernelbot-runner:latest"  # the local tag update-image.sh gives the image of the node's family

Runner = Callable[[list[str]], tuple[int, str]]
Level = tuple[str, str]  # runner.confinement.sandbox.sandbox_level(): ("full" | "limits-only", reason)


@dataclass(frozen=True)
class Check:
    ok: bool
    subject: str  # gpuN or host
    name: str
    detail: str

    def line(self) -> str:
        return f"{'OK  ' if self.ok else 'FAIL'} {self.subject:<6} {self.name:<10} {self.detail}"


# --- pure: parsing and expectations ------------------------------------------------------------------------------


def parse_cfg(text: str) -> dict[str, str]:
    """A buildkite-agent.cfg: `key="value"` lines, comments aside."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith("#"):
            values[key.strip()] = value.strip().strip('"')
    return values


def parse_tags(tags: str) -> dict[str, str]:
    return dict(tag.split("=", 1) for tag in tags.split(",") if "=" in tag)


def parse_unit(text: str) -> dict[str, list[str]]:
    """Every `Key=value` of a unit file (all sections), in order; a key may repeat (Environment)."""
    values: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith(("#", ";", "[")):
            values.setdefault(key, []).append(value)
    return values


def memory_bytes(size: str) -> int:
    """systemd's MemoryMax size (1024-based suffixes) in bytes, as memory.max shows it."""
    size = size.strip()
    if size[-1:].upper() in UNITS:
        return int(size[:-1]) * UNITS[size[-1].upper()]
    return int(size)


def cpu_max(quota: str) -> str:
    """CPUQuota=1600% as cpu.max shows it: `1600000 100000` (microseconds per period)."""
    percent = int(quota.strip().rstrip("%"))
    return f"{percent * CPU_PERIOD_US // 100} {CPU_PERIOD_US}"


def slice_cgroup(root: Path, slice_name: str) -> Path:
    """Where systemd puts a slice's cgroup: each `-` in its name is a level (`buildkite-gpu0.slice` lives in
    `buildkite.slice`)."""
    stem = slice_name.removesuffix(".slice")
    parts = stem.split("-")
    levels = ["-".join(parts[: i + 1]) + ".slice" for i in range(len(parts))]
    return root.joinpath("sys", "fs", "cgroup", *levels)


# --- the checks -------------------------------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _gpu_check(subject: str, index: str, run: Runner, image: str) -> Check:
    status, output = run(["docker", "run", "--rm", "--gpus", f"device={index}", "--network", "none",
                          "--entrypoint", "nvidia-smi", image, "-L"])
    seen = [line for line in output.splitlines() if line.startswith("GPU ")]
    gpu_ok = status == 0 and len(seen) == 1
    detail = f"a runner container sees {len(seen)} GPU(s)" + (f": {seen[0]}" if len(seen) == 1 else "")
    return Check(gpu_ok, subject, "gpu", detail if status == 0 else f"docker run failed: {output.strip()}")


def _amd_gpu_check(subject: str, render: str | None, run: Runner, image: str) -> Check:
    """A container given /dev/kfd and the agent's render node, as run-job.sh starts it, must list one GPU."""
    if render is None:
        return Check(False, subject, "gpu", "amd-smi (or rocm-smi) and sysfs give this GPU no render node")
    status, output = run(["docker", "run", "--rm", "--device", "/dev/kfd", "--device", render, "--network", "none",
                          "--entrypoint", "amd-smi", image, "list", "--json"])
    try:
        seen = [gpu for gpu in json.loads(output) if isinstance(gpu, dict)] if status == 0 else []
    except ValueError:
        seen = []
    detail = f"a runner container given {render} sees {len(seen)} GPU(s)" + (
        f": {seen[0].get('bdf')}" if len(seen) == 1 else "")
    return Check(status == 0 and len(seen) == 1, subject, "gpu",
                 detail if status == 0 else f"docker run failed: {output.strip()}")


def agent_checks(root: Path, cfg_path: Path, run: Runner, image: str) -> list[Check]:
    index = cfg_path.parent.name.removeprefix("agent-")
    subject = f"gpu{index}"
    checks: list[Check] = []
    cfg = parse_cfg(_read(cfg_path) or "")
    tags = parse_tags(cfg.get("tags", ""))
    queue = tags.get("queue", "")
    queue_ok = bool(QUEUE.fullmatch(queue)) and tags.get("gpu-index") == index
    checks.append(Check(queue_ok, subject, "queue", f"queue={queue or '(none)'} gpu-index={tags.get('gpu-index')}"
                        + ("" if queue_ok else " (expected {vendor}-{gpu}-{index} and this agent's index)")))

    unit_name = f"buildkite-agent-gpu{index}.service"
    unit_text = _read(root / "etc" / "systemd" / "system" / unit_name)
    unit = parse_unit(unit_text or "")
    slice_name = (unit.get("Slice") or [""])[-1]
    env = dict(item.split("=", 1) for item in unit.get("Environment", []) if "=" in item)
    amd = queue.startswith("amd-")
    render = rocm_devices.render_node_of(int(index), root)[0] if amd and index.isdigit() else None
    wanted = {"HIP_VISIBLE_DEVICES": index, "ROCR_VISIBLE_DEVICES": index, "KERNELBOT_RENDER_NODE": render} \
        if amd else {"CUDA_VISIBLE_DEVICES": index}
    unit_problems = [problem for problem, bad in (
        ("no unit file", unit_text is None),
        *((f"{name}={env.get(name)} (expected {value or 'the render node amd-smi and sysfs give this GPU'})",
           value is None or env.get(name) != value) for name, value in wanted.items()),
        (f"Slice={slice_name or '(none)'} (expected buildkite-gpu{index}.slice)",
         slice_name != f"buildkite-gpu{index}.slice"),
    ) if bad]
    checks.append(Check(not unit_problems, subject, "unit", "; ".join(unit_problems) or
                        f"{unit_name}: {', '.join(f'{k}={v}' for k, v in wanted.items())}, {slice_name}"))

    status, output = run(["systemctl", "is-active", unit_name])
    checks.append(Check(status == 0, subject, "running", f"{unit_name} is {output.strip() or 'unknown'}"))

    slice_text = parse_unit(_read(root / "etc" / "systemd" / "system" / slice_name) or "") if slice_name else {}
    cgroup = slice_cgroup(root, slice_name or f"buildkite-gpu{index}.slice")
    for name, key, expected_of in (("memory.max", "MemoryMax", memory_bytes), ("cpu.max", "CPUQuota", cpu_max)):
        wanted = (slice_text.get(key) or [None])[-1]
        actual = _read(cgroup / name)
        if wanted is None:
            checks.append(Check(False, subject, name, f"the slice file sets no {key}"))
        elif actual is None:
            checks.append(Check(False, subject, name, f"no {cgroup / name}: is the agent started?"))
        else:
            expected = str(expected_of(wanted))
            ok = actual.strip() == expected
            checks.append(Check(ok, subject, name, f"{actual.strip()}" + ("" if ok else f" (expected {expected} "
                                                                                 f"from {key}={wanted})")))

    checks.append(_amd_gpu_check(subject, render, run, image) if amd else _gpu_check(subject, index, run, image))
    return checks


def identity_check(root: Path) -> Check:
    """The optional runner identity the agents' units read (KB_NATS_URL, KB_RUNNER_NAME): private, well named."""
    path = root / "etc" / "buildkite-agent" / "runner.env"
    if not path.exists():
        return Check(True, "host", "identity", "none: results travel back through the build artifact only")
    values = parse_cfg(_read(path) or "")
    name, mode = values.get("KB_RUNNER_NAME", ""), path.stat().st_mode & 0o777
    problems = [problem for problem, bad in (
        (f"mode {mode:o} (expected 600: it holds a NATS password)", mode & 0o077),
        ("no KB_NATS_URL", not values.get("KB_NATS_URL")),
        (f"KB_RUNNER_NAME={name or '(none)'} (letters, digits, '-' or '_')", not re.fullmatch(r"[A-Za-z0-9_-]+", name)),
    ) if bad]
    return Check(not problems, "host", "identity", "; ".join(problems) or f"runner {name}: results reported as "
                                                                         f"runner.{name}.run.completed")


def isolation_line(level: Level) -> str:
    name, reason = level
    note = "" if name == "full" else " (runs confined this way are not ranked outside development mode)"
    return f"INFO {'host':<6} {'isolation':<10} {name}: {reason}{note}"


def host_checks(root: Path, run: Runner, image: str = RUNNER_IMAGE) -> list[Check]:
    checks = [identity_check(root)]
    # Jobs join their agent's slice by `docker run --cgroup-parent buildkite-gpuN.slice`, a slice name only the
    # systemd driver understands (with cgroupfs it would be a path outside the slice, unlimited).
    status, output = run(["docker", "info", "--format", "{{.CgroupDriver}}"])
    driver = output.strip()
    checks.append(Check(status == 0 and driver == "systemd", "host", "cgroups",
                        f"docker's cgroup driver is {driver or 'unknown'}" +
                        ("" if driver == "systemd" else " (expected systemd: jobs would escape their slice's limits)")))
    status, output = run(["docker", "image", "inspect", "--format", "{{.Id}}", image])
    checks.append(Check(status == 0, "host", "image", f"{image} {output.strip()}" if status == 0 else
                        f"{image} is missing: run scripts/buildkite/update-image.sh"))
    cfgs = sorted((root / "etc" / "buildkite-agent").glob("agent-*/buildkite-agent.cfg"),
                  key=lambda p: int(p.parent.name.removeprefix("agent-")) if p.parent.name[6:].isdigit() else 0)
    if not cfgs:
        checks.append(Check(False, "host", "agents", "no /etc/buildkite-agent/agent-N/buildkite-agent.cfg: run "
                                                      "scripts/buildkite/setup-agent.sh for each GPU"))
    for cfg in cfgs:
        checks.extend(agent_checks(root, cfg, run, image))
    return checks


def run_command(argv: list[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return done.returncode, done.stdout + done.stderr


def host_check(
    root: Annotated[Path, typer.Option(envvar="KERNELBOT_ROOT",
                                       help="Read the host's files below this directory (tests, a mounted image)")]
    = Path("/"),
    image: Annotated[str, typer.Option(help="The runner image the agents run")] = RUNNER_IMAGE,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of lines")] = False,
) -> None:
    """Check this GPU host's Buildkite agents: queue tag, unit, running, slice limits, one GPU each, the image, and
    the isolation a runner here gives its runs and the kernel settings it stands on (ptrace, user namespaces)."""
    from runner.confinement.sandbox import sandbox_level

    level = sandbox_level()
    kernel = kernel_settings(root)
    checks = host_checks(root, run_command, image)
    failed = sum(not check.ok for check in checks)
    if as_json:
        typer.echo(json.dumps({"isolation": {"level": level[0], "reason": level[1]}, "passed": not failed,
                               "kernel": {setting.name: setting.as_json() for setting in kernel},
                               "checks": [{"ok": c.ok, "subject": c.subject, "name": c.name, "detail": c.detail}
                                          for c in checks]}))
    else:
        typer.echo(isolation_line(level))
        for setting in kernel:
            typer.echo(setting.line())
        for check in checks:
            typer.echo(check.line())
        typer.echo(f"{len(checks) - failed} of {len(checks)} checks passed")
    raise typer.Exit(1 if failed else 0)
