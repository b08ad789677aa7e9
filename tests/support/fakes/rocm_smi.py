"""Stand-ins for ROCm's `amd-smi` and `rocm-smi`, answering their JSON modes as the real tools print them.

    python rocm_smi.py amd-smi list --json
    python rocm_smi.py amd-smi static --asic --driver --vram --json
    python rocm_smi.py rocm-smi --showbus --showproductname --showuniqueid --json
    python rocm_smi.py rocm-smi --showdriverversion --json

The GPUs come from the JSON file `$KB_FAKE_ROCM` (a list of {"bdf", "uuid", "name", "driver", "vram_mb", "render"}
in ROCm's order). `$KB_FAKE_ROCM_RENDER`, when set, is the comma-separated render nodes a container was given:
only those GPUs are listed, re-numbered from 0, as ROCm inside such a container sees them. Each call is appended
to `$KB_FAKE_ROCM_LOG` when set. A tool missing on a host is simply not put on PATH.
"""

from __future__ import annotations

import json
import os
import sys


def _gpus() -> list[dict]:
    gpus = json.loads(open(os.environ["KB_FAKE_ROCM"], encoding="utf-8").read())
    visible = os.environ.get("KB_FAKE_ROCM_RENDER")
    if visible is not None:
        allowed = {node.rsplit("/", 1)[-1] for node in visible.split(",") if node}
        gpus = [gpu for gpu in gpus if gpu["render"] in allowed]
    return gpus


def amd_smi(argv: list[str]) -> int:
    if "--json" not in argv:
        print("this stand-in answers the JSON mode only", file=sys.stderr)
        return 2
    gpus = _gpus()
    if not gpus:
        print("ERROR:root:Unable to detect any GPU devices, check amdgpu version and module status (sudo modprobe "
              "amdgpu)", file=sys.stderr)
        return 255  # amd-smi's exit status when amdsmi_init finds no GPU
    if argv[0] == "list":
        print(json.dumps([{"gpu": i, "bdf": gpu["bdf"], "uuid": gpu["uuid"], "kfd_id": 1000 + i, "node_id": i + 2,
                           "partition_id": 0} for i, gpu in enumerate(gpus)], indent=4))
        return 0
    if argv[0] == "static":
        everything = not any(flag in argv for flag in ("--asic", "--driver", "--vram"))
        rows = []
        for i, gpu in enumerate(gpus):
            row: dict = {"gpu": i}
            if everything or "--asic" in argv:
                row["asic"] = {"market_name": gpu["name"], "vendor_id": "0x1002",
                               "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]", "subvendor_id": "0x1002",
                               "device_id": "0x74a1", "subsystem_id": "0x74a1", "rev_id": "0x00",
                               "asic_serial": f"0x{i:016X}", "oam_id": i, "num_compute_units": 304,
                               "target_graphics_version": "gfx942"}
            if everything or "--driver" in argv:
                row["driver"] = {"name": "amdgpu", "version": gpu["driver"]}
            if everything or "--vram" in argv:
                row["vram"] = {"type": "HBM", "vendor": "N/A", "size": {"value": gpu["vram_mb"], "unit": "MB"},
                               "bit_width": 8192}
            rows.append(row)
        print(json.dumps(rows, indent=4))
        return 0
    print(f"amd-smi: unknown command {argv[0]}", file=sys.stderr)
    return 2


def rocm_smi(argv: list[str]) -> int:
    if "--json" not in argv:
        print("this stand-in answers the JSON mode only", file=sys.stderr)
        return 2
    gpus = _gpus()
    if "--showdriverversion" in argv:
        print(json.dumps({"system": {"Driver version": gpus[0]["driver"] if gpus else ""}}))
        return 0
    cards = {}
    for i, gpu in enumerate(gpus):
        card: dict = {}
        if "--showbus" in argv:
            card["PCI Bus"] = gpu["bdf"].upper()
        if "--showproductname" in argv:
            card.update({"Card Series": gpu["name"], "Card Model": "0x74a1",
                         "Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]", "Card SKU": "M3000100",
                         "Subsystem ID": "0x74a1", "Device Rev": "0x00", "Node ID": str(i + 2),
                         "GUID": str(1000 + i), "GFX Version": "gfx942"})
        if "--showuniqueid" in argv:
            card["Unique ID"] = gpu["uuid"]
        cards[f"card{i}"] = card
    print(json.dumps(cards))
    return 0


def main() -> int:
    tool, argv = sys.argv[1], sys.argv[2:]
    log = os.environ.get("KB_FAKE_ROCM_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"tool": tool, "argv": argv}) + "\n")
    return {"amd-smi": amd_smi, "rocm-smi": rocm_smi}[tool](argv)


if __name__ == "__main__":
    sys.exit(main())
