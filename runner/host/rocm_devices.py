"""AMD GPUs as ROCm's tools list them, and the device nodes that give a container exactly one of them.

`amd-smi` answers first; hosts with only the older `rocm-smi` fall back to it. Both are asked in their JSON modes
(`amd-smi list --json`, `amd-smi static --asic --driver --vram --json`; `rocm-smi --showbus --showproductname
--showuniqueid --json`). A container reaches an AMD GPU through `/dev/kfd` (the compute interface, shared) and that
GPU's own render node `/dev/dri/renderD<N>`, found from the GPU's PCI address in sysfs: ROCm only opens the GPUs
whose render node it can open, so passing one render node is what isolates one GPU.

Standard library only: deploy/buildkite/setup-agent.sh runs `python3 -m runner.host.rocm_devices render-node N` on the
vendor's host, from the checkout, and setup-agents.sh `... count`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TIMEOUT_S = 20
Run = Callable[[list[str]], tuple[int, str]]


@dataclass(frozen=True)
class AmdGpu:
    index: int
    bdf: str  # PCI address, lower case: 0000:0c:00.0
    uuid: str = ""
    name: str = ""
    driver: str = ""
    memory_mib: int | None = None
    source: str = "amd-smi"


def run_tool(argv: list[str]) -> tuple[int, str]:
    """(exit status, stdout) of a tool on PATH; 127 when it is missing or fails to start."""
    if shutil.which(argv[0]) is None:
        return 127, ""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return 127, ""
    return done.returncode, done.stdout


def _json(run: Run, argv: list[str]) -> Any:
    status, output = run(argv)
    if status != 0:
        return None
    try:
        return json.loads(output)
    except ValueError:
        return None


def _value(field: Any) -> Any:
    """amd-smi writes a measured value as {"value": v, "unit": u} (ROCm 6.1 on), older versions as a bare value."""
    return field.get("value") if isinstance(field, dict) else field


def _mib(field: Any) -> int | None:
    value, unit = _value(field), (field.get("unit", "MB") if isinstance(field, dict) else "MB")
    try:
        amount = float(str(value).split()[0])
    except (ValueError, IndexError):
        return None
    return int(amount * 1024) if str(unit).upper().startswith("G") else int(amount)


def _entries(data: Any) -> list[dict]:
    """amd-smi's JSON is a list of per-GPU objects keyed by `gpu`; some versions wrap it as {"gpu_data": [...]}."""
    if isinstance(data, dict):
        data = data.get("gpu_data", [])
    return [entry for entry in data if isinstance(entry, dict) and isinstance(entry.get("gpu"), int)] \
        if isinstance(data, list) else []


def amd_smi_gpus(run: Run = run_tool) -> list[AmdGpu] | None:
    """Every GPU `amd-smi` lists, with what its static query says; None when amd-smi does not answer."""
    listed = _entries(_json(run, ["amd-smi", "list", "--json"]))
    if not listed:
        return None
    static = {entry["gpu"]: entry for entry in _entries(_json(run, ["amd-smi", "static", "--asic", "--driver",
                                                                     "--vram", "--json"]))}
    gpus = []
    for entry in sorted(listed, key=lambda e: e["gpu"]):
        about = static.get(entry["gpu"], {})
        asic, driver, vram = (about.get(key) or {} for key in ("asic", "driver", "vram"))
        gpus.append(AmdGpu(index=entry["gpu"], bdf=str(entry.get("bdf", "")).lower(), uuid=str(entry.get("uuid", "")),
                           name=str(asic.get("market_name", "")), driver=str(driver.get("version", "")),
                           memory_mib=_mib(vram.get("size"))))
    return gpus


def rocm_smi_gpus(run: Run = run_tool) -> list[AmdGpu] | None:
    """The same from `rocm-smi` (cards `card0`, `card1`, ... in ROCm's order); None when it does not answer."""
    data = _json(run, ["rocm-smi", "--showbus", "--showproductname", "--showuniqueid", "--json"])
    if not isinstance(data, dict):
        return None
    driver = _json(run, ["rocm-smi", "--showdriverversion", "--json"]) or {}
    version = str((driver.get("system") or {}).get("Driver version", "")) if isinstance(driver, dict) else ""
    cards = sorted((int(key[4:]), value) for key, value in data.items()
                   if re.fullmatch(r"card[0-9]+", key) and isinstance(value, dict))
    return [AmdGpu(index=index, bdf=str(card.get("PCI Bus", "")).lower(), uuid=str(card.get("Unique ID", "")),
                   name=str(card.get("Card Series", "")), driver=version, source="rocm-smi")
            for index, card in cards] or None


def amd_gpus(run: Run = run_tool) -> list[AmdGpu]:
    """amd-smi's answer, else rocm-smi's, else no AMD GPU."""
    return amd_smi_gpus(run) or rocm_smi_gpus(run) or []


def render_node(bdf: str, root: Path = Path("/")) -> str | None:
    """`/dev/dri/renderD<N>` of the GPU at PCI address `bdf`, from sysfs; None when it has none."""
    drm = root / "sys" / "bus" / "pci" / "devices" / bdf / "drm"
    nodes = sorted(path.name for path in drm.glob("renderD*")) if drm.is_dir() else []
    return f"/dev/dri/{nodes[0]}" if nodes else None


def render_node_of(index: int, root: Path = Path("/"), run: Run = run_tool) -> tuple[str | None, str]:
    """(render node, why not) of ROCm GPU `index` on this host."""
    gpus = amd_gpus(run)
    gpu = next((gpu for gpu in gpus if gpu.index == index), None)
    if gpu is None:
        return None, (f"amd-smi and rocm-smi list {len(gpus)} AMD GPU(s): index {index} is not one of them"
                      if gpus else "neither amd-smi nor rocm-smi answers: is ROCm installed?")
    node = render_node(gpu.bdf, root)
    return node, "" if node else f"GPU {index} ({gpu.bdf}) has no render node under /sys/bus/pci/devices"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.host.rocm_devices")
    parser.add_argument("command", choices=["render-node", "count"])
    parser.add_argument("index", type=int, nargs="?", default=0)
    parser.add_argument("--root", type=Path, default=Path("/"), help="read sysfs below this directory (tests)")
    args = parser.parse_args(argv)
    if args.command == "count":
        print(len(amd_gpus()))
        return 0
    node, why = render_node_of(args.index, args.root)
    if node is None:
        print(f"rocm_devices: {why}", file=sys.stderr)
        return 2
    print(node)
    return 0


if __name__ == "__main__":
    sys.exit(main())
