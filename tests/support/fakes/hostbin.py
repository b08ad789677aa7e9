"""Stand-ins for a vendor host's `systemctl`, `journalctl` and `docker`, put first on PATH by tests.

Each call is appended to `$KB_SHIM_LOG` as one JSON line `{"tool": ..., "argv": [...], "env": {...}}`, and answered
from a small state directory `$KB_SHIM_STATE`:

    active/<unit>              a unit systemctl started (enable --now, start, restart)
    registry/<image>           the image id `docker pull <image>` would fetch
    images/<image>             images present locally (their id)
    running/<gpu index>        a runner container running on that GPU (what `docker ps --filter label=...` finds)
    gpus                       the GPU lines `nvidia-smi -L` prints inside a container given one device
    rocm.json                  the host's AMD GPUs (tests/support/fakes/rocm_smi.py): `amd-smi` in a container
                               lists those whose render node `--device` gave it
    cgroup-driver              what `docker info` reports as its cgroup driver (default systemd)

Unit files are read from `$KB_SHIM_ROOT/etc/systemd/system`. `docker run` of the runner image really runs the
runner entry point (`python -m runner.container`) with the mounted /work directory mapped to the host one.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
from pathlib import Path

STATE = Path(os.environ.get("KB_SHIM_STATE", "/nonexistent"))
ROOT = Path(os.environ.get("KB_SHIM_ROOT", "/"))
RECORDED_ENV = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "SUBMISSION_PAYLOAD")
ROCM_SMI = Path(__file__).with_name("rocm_smi.py")


def _record(tool: str, argv: list[str]) -> None:
    with open(os.environ["KB_SHIM_LOG"], "a", encoding="utf-8") as log:
        env = {key: os.environ[key] for key in RECORDED_ENV if key in os.environ}
        log.write(json.dumps({"tool": tool, "argv": argv, "env": env}) + "\n")


def _key(image: str) -> str:
    return image.replace("/", "_").replace(":", "__")


def _units(pattern: str) -> list[str]:
    directory = ROOT / "etc" / "systemd" / "system"
    names = sorted(p.name for p in directory.glob("*.service")) if directory.is_dir() else []
    wanted = pattern if pattern.endswith(".service") else pattern + ".service"
    return [name for name in names if fnmatch.fnmatch(name, wanted)]


def _unit_name(name: str) -> str:
    return name if "." in name else name + ".service"


def systemctl(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    verb, rest = (args[0], args[1:]) if args else ("", [])
    active = STATE / "active"
    active.mkdir(parents=True, exist_ok=True)
    if verb == "list-units":
        for name in _units(rest[0] if rest else "*"):
            state = "active running" if (active / name).exists() else "inactive dead"
            print(f"{name} loaded {state} Buildkite agent")
        return 0
    if verb in ("start", "restart") or (verb == "enable" and "--now" in argv):
        for pattern in rest:
            for name in _units(pattern) if "*" in pattern else [_unit_name(pattern)]:
                (active / name).touch()
        return 0
    if verb == "stop":
        for pattern in rest:
            for name in _units(pattern) if "*" in pattern else [_unit_name(pattern)]:
                (active / name).unlink(missing_ok=True)
        return 0
    if verb in ("is-active", "status"):
        name = _unit_name(rest[0])
        up = (active / name).exists()
        print(f"● {name}\n     Active: active (running)" if verb == "status" and up else
              ("active" if up else "inactive"))
        return 0 if up else 3
    return 0  # daemon-reload, enable without --now


def _docker_run(argv: list[str]) -> int:
    volumes: dict[str, str] = {}
    passed_env: dict[str, str] = {}
    index, positional = 0, []
    entrypoint = None
    devices: list[str] = []
    while index < len(argv):
        arg = argv[index]
        if arg in ("--volume", "-v"):
            host, inside = argv[index + 1].split(":")[:2]  # host:inside[:ro]
            volumes[inside] = host
            index += 2
        elif arg == "--entrypoint":
            entrypoint = argv[index + 1]
            index += 2
        elif arg in ("-e", "--env"):
            name, has_value, value = argv[index + 1].partition("=")
            if has_value or name in os.environ:
                passed_env[name] = value if has_value else os.environ[name]
            index += 2
        elif arg == "--device":
            devices.append(argv[index + 1].split(":")[0])  # host[:inside[:permissions]]
            index += 2
        elif arg in ("--gpus", "--network", "--cap-add", "--label", "--name", "--cgroup-parent", "--group-add"):
            index += 2
        elif arg.startswith("-"):
            index += 1
        else:
            positional = argv[index:]
            break
    image, command = positional[0], positional[1:] or ["--result", "/work/result.json"]  # the image's CMD
    if not (STATE / "images" / _key(image)).exists():
        print(f"Unable to find image '{image}' locally", file=sys.stderr)
        return 125
    if entrypoint in ("amd-smi", "rocm-smi"):
        visible = ",".join(device for device in devices if device.startswith("/dev/dri/"))
        env = {**os.environ, "KB_FAKE_ROCM": str(STATE / "rocm.json"), "KB_FAKE_ROCM_RENDER": visible}
        return subprocess.call([sys.executable, str(ROCM_SMI), entrypoint, *command], env=env)
    if entrypoint == "nvidia-smi":
        gpus = STATE / "gpus"
        print(gpus.read_text() if gpus.exists() else "", end="")
        return 0

    def host_path(path: str) -> str:
        for inside, host in volumes.items():
            if path == inside or path.startswith(inside + "/"):
                return host + path[len(inside):]
        return path

    mapped = [host_path(arg) for arg in command]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")} | passed_env
    if entrypoint not in (None, "python"):
        return subprocess.call([entrypoint, *mapped], env=env)  # a tool of the image (chown)
    program = [sys.executable] if entrypoint == "python" else [sys.executable, "-m", "runner.container"]
    return subprocess.call([*program, *mapped], env=env, cwd=volumes.get("/work"))


def docker(argv: list[str]) -> int:
    verb = argv[0] if argv else ""
    images = STATE / "images"
    images.mkdir(parents=True, exist_ok=True)
    if verb == "pull":
        image = [a for a in argv[1:] if not a.startswith("-")][0]
        source = STATE / "registry" / _key(image)
        if not source.exists():
            print(f"Error response from daemon: manifest for {image} not found", file=sys.stderr)
            return 1
        (images / _key(image)).write_text(source.read_text())
        return 0
    if verb == "image" and argv[1:2] == ["inspect"]:
        found = images / _key(argv[-1])
        if not found.exists():
            print(f"Error: No such image: {argv[-1]}", file=sys.stderr)
            return 1
        print(found.read_text().strip())
        return 0
    if verb == "tag":
        (images / _key(argv[2])).write_text((images / _key(argv[1])).read_text())
        return 0
    if verb == "ps":
        label = next((a.split("=", 2)[-1] for a in argv if a.startswith("label=")), None)
        running = STATE / "running" / str(label)
        print(running.read_text().strip() if label is not None and running.exists() else "")
        return 0
    if verb == "run":
        return _docker_run(argv[1:])
    if verb == "info":
        driver = STATE / "cgroup-driver"
        print(driver.read_text().strip() if driver.exists() else "systemd")
        return 0
    return 0  # image prune


def journalctl(argv: list[str]) -> int:
    print("-- No entries --")
    return 0


def main() -> int:
    tool, argv = sys.argv[1], sys.argv[2:]
    _record(tool, argv)
    return {"systemctl": systemctl, "docker": docker, "journalctl": journalctl}[tool](argv)


if __name__ == "__main__":
    sys.exit(main())
