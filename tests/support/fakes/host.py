"""A vendor GPU host under a temporary root, for the Buildkite onboarding scripts and `kernelbot host-check`.

The scripts write below `root` (their `--root`); `systemctl` and `docker` are stand-ins on PATH
(tests/support/fakes/hostbin.py) that record every call and answer from `state`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.support.fakes import hostbin

REPO = Path(__file__).resolve().parents[3]
TOOLS = ("systemctl", "journalctl", "docker")
ROCM_SMI = Path(hostbin.__file__).with_name("rocm_smi.py")


class FakeHost:
    def __init__(self, base: Path) -> None:
        self.root = base / "root"
        self.state = base / "state"
        self.bin = base / "bin"
        self.log = base / "calls.jsonl"
        for directory in (self.root, self.state, self.bin):
            directory.mkdir(parents=True, exist_ok=True)
        self.log.touch()
        for tool in TOOLS:
            shim = self.bin / tool
            shim.write_text(f"#!/bin/sh\nexec {sys.executable} {hostbin.__file__} {tool} \"$@\"\n")
            shim.chmod(0o755)
        sudo = self.bin / "sudo"  # the tests run as the user the commands are for
        sudo.write_text('#!/bin/sh\nexec "$@"\n')
        sudo.chmod(0o755)

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PATH": f"{self.bin}:{os.environ['PATH']}", "HOME": os.environ.get("HOME", "/root"),
            "LANG": "C.UTF-8", "PYTHONPATH": str(REPO), "KB_SHIM_LOG": str(self.log),
            "KB_SHIM_STATE": str(self.state), "KB_SHIM_ROOT": str(self.root),
            "KB_FAKE_ROCM": str(self.state / "rocm.json"), **extra,
        }

    def calls(self, tool: str | None = None) -> list[dict]:
        entries = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [entry for entry in entries if tool is None or entry["tool"] == tool]

    def argvs(self, tool: str) -> list[list[str]]:
        return [entry["argv"] for entry in self.calls(tool)]

    def clear_calls(self) -> None:
        self.log.write_text("")

    # --- state the stand-ins answer from -------------------------------------------------------------------------

    def write_token(self, token: str) -> Path:
        path = self.root / "etc" / "buildkite-agent" / "token"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"BUILDKITE_AGENT_TOKEN={token}\n")
        path.chmod(0o600)
        return path

    def _put(self, relative: str, text: str) -> None:
        path = self.state / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def publish_image(self, image: str, image_id: str) -> None:
        """What the registry serves for `image` from now on."""
        self._put(f"registry/{hostbin._key(image)}", image_id)

    def local_image(self, image: str, image_id: str | None) -> None:
        path = self.state / "images" / hostbin._key(image)
        if image_id is None:
            path.unlink(missing_ok=True)
        else:
            self._put(f"images/{hostbin._key(image)}", image_id)

    def image_id(self, image: str) -> str | None:
        path = self.state / "images" / hostbin._key(image)
        return path.read_text().strip() if path.exists() else None

    def job_running(self, index: int, running: bool = True) -> None:
        path = self.state / "running" / str(index)
        if running:
            self._put(f"running/{index}", f"container-on-gpu{index}")
        else:
            path.unlink(missing_ok=True)

    def visible_gpus(self, count: int) -> None:
        """How many GPUs a container given one device sees (1 when isolation holds)."""
        self._put("gpus", "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:04d})\n" for i in range(count)))

    def amd_gpus(self, count: int, tools: tuple[str, ...] = ("amd-smi", "rocm-smi")) -> list[dict]:
        """`count` MI300X GPUs: ROCm's tools (those in `tools`) on PATH, and each GPU's render node in sysfs. The
        render minors are not 128 + index, as on real nodes where display devices take some."""
        gpus = [{"bdf": f"0000:{0x0c + 0x10 * i:02x}:00.0", "uuid": f"{i:02x}ff74a1-0000-1000-80ab-5c1e2f3a4b{i:02x}",
                 "name": "AMD Instinct MI300X", "driver": "6.8.5", "vram_mb": 196592, "render": f"renderD{130 + i}"}
                for i in range(count)]
        self._put("rocm.json", json.dumps(gpus))
        for gpu in gpus:
            (self.root / "sys" / "bus" / "pci" / "devices" / gpu["bdf"] / "drm" / gpu["render"]).mkdir(
                parents=True, exist_ok=True)
        for tool in tools:
            shim = self.bin / tool
            shim.write_text(f"#!/bin/sh\nexec {sys.executable} {ROCM_SMI} {tool} \"$@\"\n")
            shim.chmod(0o755)
        return gpus

    def active(self, unit: str) -> bool:
        return (self.state / "active" / unit).exists()

    def cgroup(self, index: int, memory_max: str, cpu_max: str) -> Path:
        """The slice's cgroup as systemd makes it: `buildkite-gpuN.slice` is a child of `buildkite.slice`."""
        path = self.root / "sys" / "fs" / "cgroup" / "buildkite.slice" / f"buildkite-gpu{index}.slice"
        path.mkdir(parents=True, exist_ok=True)
        (path / "memory.max").write_text(memory_max + "\n")
        (path / "cpu.max").write_text(cpu_max + "\n")
        return path
