"""Which fingerprint differences make scores incomparable, and the scorer's decision when a board asks for the same
hardware (pure; the services' side runs in tests/operate/test_hardware_fingerprints.py)."""

from __future__ import annotations

from schemas.contracts import CpuFingerprint, Fingerprint, GpuFingerprint, SystemInfo
from schemas.events import PlannedRun
from services.scorer import fingerprints, scoring
from services.scorer.scoring import RunVerdict


def gpu_host(**changes) -> SystemInfo:
    gpu = GpuFingerprint(name="NVIDIA H100 80GB HBM3", uuid="GPU-a", driver="550.54.15", runtime_version="12.4",
                         sm_clock_mhz=1755, max_sm_clock_mhz=1980, power_limit_w=700.0, ecc="enabled")
    return SystemInfo(gpu="H100", hostname="a", fingerprint=Fingerprint(source="nvml", gpus=[gpu.model_copy(
        update=changes)], cpu=CpuFingerprint(model="AMD EPYC", cores=64)))


def test_what_matters_on_a_gpu_board_and_what_does_not():
    reference = fingerprints.hardware_of(gpu_host())
    assert reference == {"gpu0.name": "NVIDIA H100 80GB HBM3", "gpu0.driver": "550.54.15",
                         "gpu0.runtime_version": "12.4", "gpu0.sm_clock_mhz": "1755", "gpu0.power_limit_w": "700.0",
                         "gpu0.ecc": "enabled"}
    same_kind = fingerprints.hardware_of(gpu_host(uuid="GPU-b", max_sm_clock_mhz=1900))
    assert fingerprints.differences(reference, same_kind) == []
    capped = fingerprints.hardware_of(gpu_host(power_limit_w=500.0, ecc="disabled"))
    assert fingerprints.differences(reference, capped) == ["gpu0.ecc: enabled ≠ disabled",
                                                           "gpu0.power_limit_w: 700.0 ≠ 500.0"]
    # a host reporting less (nvidia-smi knows no CUDA version) is judged on what both know; GPU counts always
    partial = {k: v for k, v in reference.items() if k != "gpu0.runtime_version"}
    assert fingerprints.differences(reference, partial) == []
    two = reference | {k.replace("gpu0", "gpu1"): v for k, v in reference.items()}
    assert fingerprints.differences(reference, two) == ["gpus: 1 ≠ 2"]


def test_a_cpu_board_compares_model_cores_and_governor_never_frequency():
    def cpu(**changes):
        base = CpuFingerprint(model="Xeon", cores=2, governor="performance", frequency_mhz=2600.0)
        return fingerprints.hardware_of(SystemInfo(fingerprint=Fingerprint(source="none", cpu=base.model_copy(
            update=changes))))

    assert fingerprints.differences(cpu(), cpu(frequency_mhz=3100.0)) == []
    assert fingerprints.differences(cpu(), cpu(governor="powersave")) == ["cpu.governor: performance ≠ powersave"]


def test_results_without_a_fingerprint_are_not_judged_by_it():
    assert fingerprints.hardware_of(SystemInfo(gpu="H100")) == {}
    assert fingerprints.differences({}, fingerprints.hardware_of(gpu_host())) == []


def test_hold_back_turns_a_score_on_other_hardware_into_a_rejection():
    planned = [PlannedRun(run_id="p", gpu="H100", mode="leaderboard"),
               PlannedRun(run_id="s", gpu="H100", mode="private", secret=True)]
    older = fingerprints.hardware_of(gpu_host(driver="535.104.05"))
    verdicts = {"p": RunVerdict(passed=True, score=1e-6, hardware=older), "s": RunVerdict(passed=True, score=1e-6)}
    decision = scoring.decide("leaderboard", planned, verdicts)
    assert decision.status == "succeeded" and decision.scores[0].hardware == older
    held = scoring.hold_back(decision, {"H100": fingerprints.hardware_of(gpu_host())})
    assert held.status == "failed" and held.scores == []
    assert held.error == ("measured on hardware that differs from the board's on H100 (gpu0.driver: 550.54.15 ≠ "
                          "535.104.05); submission will not appear on the leaderboard")
    assert scoring.hold_back(decision, {"H100": older}) is decision
    assert scoring.hold_back(decision, {}) is decision  # no reference yet: nothing to compare with
