"""The wire format of every event and contract, pinned by JSON-schema snapshots, and the envelope's rules.

A failing snapshot means a model's schema changed. If that is intended, regenerate with
`.venv/bin/python scripts/update_snapshots.py` and review the diff: a breaking change of an event is a new type
(docs/architecture.md "The event catalogue").
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from schemas import contracts, events, operations_events, policy_events, precheck_events
from schemas.envelope import Event

ROOT = Path(__file__).resolve().parents[2]
HINT = "run .venv/bin/python scripts/update_snapshots.py"


def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(f"kb_script_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


snapshots = _load_script("update_snapshots")
MODELS: dict[str, type[BaseModel]] = snapshots.models()


# ------------------------------------------------------------------------------------------------ snapshots


def test_snapshot_set_covers_the_catalogue_and_the_contracts() -> None:
    # Guards the collector itself: a contract or event left out would never be pinned.
    expected = {e.__name__ for e in events.CATALOGUE} | {"Task", "RunPayload", "FullResult", "EvalResult", "RunResult"}
    assert expected <= set(MODELS)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_schema_matches_snapshot(name: str) -> None:
    path = snapshots.snapshot_path(name)
    actual = snapshots.render(MODELS[name])
    if not path.exists():
        pytest.fail(f"{name} has no schema snapshot ({path.relative_to(ROOT)}); {HINT}", pytrace=False)
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                fromfile=f"snapshot {path.relative_to(ROOT)}",
                tofile=f"current {name}.model_json_schema()",
            )
        )
        pytest.fail(f"the JSON schema of {name} differs from its snapshot; {HINT}\n{diff}", pytrace=False)


def test_no_snapshot_without_a_model() -> None:
    stale = sorted(p.stem for p in snapshots.SNAPSHOT_DIR.glob("*.json") if p.stem not in MODELS)
    assert not stale, f"snapshots for models no longer in the catalogue or contracts: {stale}; {HINT}"


def test_every_model_has_a_snapshot() -> None:
    missing = sorted(name for name in MODELS if not snapshots.snapshot_path(name).exists())
    assert not missing, f"models without a schema snapshot: {missing}; {HINT}"


def test_snapshot_files_are_canonical_json() -> None:
    for path in sorted(snapshots.SNAPSHOT_DIR.glob("*.json")):
        text = path.read_text(encoding="utf-8")
        assert text.endswith("}\n") and not text.endswith("\n\n"), f"{path.name}: one trailing newline"
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n", path.name


# ---------------------------------------------------------------------------------------------- sample data

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
TASK = contracts.Task(
    lang="py",
    files={"submission.py": contracts.SUBMISSION_MARKER, "eval.py": "print('hi')"},
    config=contracts.PyConfig(main="eval.py"),
    tests=[{"size": 128, "seed": 1}],
    benchmarks=[{"size": 1024, "seed": 2}],
)
RESULT = contracts.FullResult(
    success=True,
    system=contracts.SystemInfo(gpu="cpu"),
    runs={
        "test": contracts.EvalResult(
            start="2025-03-01T12:00:00Z",
            end="2025-03-01T12:00:05Z",
            run=contracts.RunResult(success=True, passed=True, result={"check": "pass"}),
        )
    },
)
RANK_ENTRY = dict(rank=1, user_id="u1", user_name="ada", score=1.5e-6, submission_id=7)

# Business fields of one instance of every event. A new event type needs an entry here.
EVENT_FIELDS: dict[type[Event], dict[str, Any]] = {
    events.LeaderboardCreated: dict(
        name="grayscale", task=TASK, task_hash="abc", gpus=["H100"], deadline=T0, secret_seed=42
    ),
    events.LeaderboardUpdated: dict(name="grayscale", task=TASK, task_hash="abc", deadline=T0),
    events.LeaderboardDeleted: dict(name="grayscale"),
    events.CliUserRegistered: dict(user_id="u1", user_name="ada", cli_id_sha256="a1" * 32),
    events.UserRenamed: dict(user_id="u1", user_name="Ada L.", change_id="c1"),
    events.OAuthUserRegistered: dict(user_id="u1", user_name="ada", cli_id_sha256="a1" * 32, provider="github"),
    events.WebAuthIdSet: dict(user_id="u1", user_name="ada", web_auth_id_sha256="c3" * 32),
    events.WebsiteUserSignedIn: dict(user_id="u1", user_name="ada"),
    events.SubmissionReceived: dict(
        submission_id=7, leaderboard="grayscale", gpus=["H100"], mode="test", user_id="u1", user_name="ada",
        file_name="submission.py", code="print(1)",
    ),
    events.SubmissionAccepted: dict(
        submission_id=7, leaderboard="grayscale", user_id="u1", user_name="ada", mode="leaderboard",
        ranking_by="geom", submitted_at=T0,
        runs=[dict(run_id="7.H100.public", gpu="H100", mode="leaderboard")],
        precheck=dict(outcome="hacked", detail="Submission rejected by KernelGuard pre-check (line 2: x). "
                                               "Matched rules: timer-patch.",
                      findings=[dict(rule="timer-patch", severity="high", message="x", line=2)]),
    ),
    events.SubmissionRejected: dict(submission_id=7, reason="nope", status_code=404),
    events.SubmissionFinished: dict(submission_id=7, status="failed", error="test failed on H100: x"),
    events.SubmissionDeleted: dict(submission_id=7, user_id="u1"),
    events.RunRequested: dict(
        run_id="7.H100.test", submission_id=7, leaderboard="grayscale", gpu="H100", mode="test", timeout_s=360
    ),
    events.RunDispatched: dict(
        run_id="7.H100.test", submission_id=7, gpu="H100", backend="local", job_ref="pid-1", attempt=2
    ),
    events.RunStarted: dict(run_id="7.H100.test", submission_id=7, gpu="H100", attempt=2),
    events.RunProgress: dict(run_id="7.H100.test", submission_id=7, sequence=3, message="compiling"),
    events.RunCompleted: dict(
        run_id="7.H100.test", submission_id=7, leaderboard="grayscale", gpu="H100", mode="test", result=RESULT
    ),
    events.RunFailed: dict(run_id="7.H100.test", submission_id=7, gpu="H100", reason="lost", retryable=True),
    events.ScoreComputed: dict(
        submission_id=7, leaderboard="grayscale", gpu="H100", user_id="u1", user_name="ada",
        run_id="7.H100.public", score=1.5e-6, ranking_by="geom", submitted_at=T0,
    ),
    events.ScoreRejected: dict(submission_id=7, leaderboard="grayscale", gpu="H100", reason="secret failed"),
    precheck_events.ScoreHeld: dict(submission_id=7, leaderboard="grayscale", gpu="H100", user_id="u1", user_name="ada",
                           run_id="7.H100.public", score=1.5e-9, rule="roofline",
                           reason="benchmark 0 took 1.5 ns on H100, below its roofline floor of 2 µs"),
    events.LeaderboardRankChanged: dict(
        leaderboard="grayscale", gpu="H100", top=[RANK_ENTRY], caused_by_submission=7
    ),
    operations_events.RejudgeRequested: dict(rejudge_id="r1", leaderboard="grayscale", action="rescore"),
    operations_events.RerunPlanned: dict(rejudge_id="r1", submission_id=7, leaderboard="grayscale",
                                         runs=[dict(run_id="7.H100.public.r1", gpu="H100", mode="leaderboard")]),
    operations_events.ScoreRevised: dict(
        rejudge_id="r1", submission_id=7, leaderboard="grayscale", gpu="H100", user_id="u1", user_name="ada",
        run_id="7.H100.public", score=None, ranking_by="geom", submitted_at=T0,
    ),
    operations_events.RejudgeCompleted: dict(rejudge_id="r1", leaderboard="grayscale", action="rescore",
                                             submissions=2, revised=1),
    policy_events.IntakePaused: dict(change_id="c1"),
    policy_events.IntakeResumed: dict(change_id="c1"),
    policy_events.UserBanned: dict(user_id="u1", change_id="c1"),
    policy_events.UserUnbanned: dict(user_id="u1", change_id="c1"),
    policy_events.RateLimitSet: dict(
        leaderboard="grayscale", mode_category="leaderboard", max_submissions_per_hour=3, change_id="c1"
    ),
    policy_events.RateLimitCleared: dict(leaderboard="grayscale", mode_category="test", change_id="c1"),
    policy_events.InvitesCreated: dict(leaderboards=["grayscale"], codes=["k1", "k2"]),
    policy_events.InviteClaimed: dict(code="k1", user_id="u1", user_name="ada"),
    policy_events.InviteRevoked: dict(code="k1"),
    policy_events.LeaderboardVisibilityChanged: dict(leaderboard="grayscale", visibility="closed", change_id="c1"),
    precheck_events.PrecheckPolicySet: dict(leaderboard="grayscale", outcomes={"thread": "off"}, change_id="c1"),
    precheck_events.PrecheckCleared: dict(submission_id=7, cleared_by="admin", change_id="c1"),
    precheck_events.SubmissionReinstated: dict(submission_id=7, status="succeeded", rejudge_id="r1"),
}

# A field of the business identity for each event, and a different value for it: the id must change with it.
IDENTITY_CHANGE: dict[type[Event], tuple[str, Any]] = {
    events.LeaderboardCreated: ("task_hash", "def"),
    events.LeaderboardUpdated: ("description", "new text"),
    events.LeaderboardDeleted: ("name", "other"),
    events.CliUserRegistered: ("cli_id_sha256", "b2" * 32),
    events.UserRenamed: ("change_id", "c2"),
    events.OAuthUserRegistered: ("provider", "discord"),
    events.WebAuthIdSet: ("web_auth_id_sha256", "d4" * 32),
    events.WebsiteUserSignedIn: ("user_id", "u2"),
    events.SubmissionReceived: ("submission_id", 8),
    events.SubmissionAccepted: ("submission_id", 8),
    events.SubmissionRejected: ("submission_id", 8),
    events.SubmissionFinished: ("submission_id", 8),
    events.SubmissionDeleted: ("submission_id", 8),
    events.RunRequested: ("run_id", "7.H100.benchmark"),
    events.RunDispatched: ("attempt", 3),
    events.RunStarted: ("attempt", 3),
    events.RunProgress: ("sequence", 4),
    events.RunCompleted: ("run_id", "7.T4.test"),
    events.RunFailed: ("run_id", "7.T4.test"),
    events.ScoreComputed: ("gpu", "T4"),
    events.ScoreRejected: ("gpu", "T4"),
    precheck_events.ScoreHeld: ("gpu", "T4"),
    events.LeaderboardRankChanged: ("caused_by_submission", 8),
    operations_events.RejudgeRequested: ("rejudge_id", "r2"),
    operations_events.RerunPlanned: ("submission_id", 8),
    operations_events.ScoreRevised: ("gpu", "T4"),
    operations_events.RejudgeCompleted: ("rejudge_id", "r2"),
    policy_events.IntakePaused: ("change_id", "c2"),
    policy_events.IntakeResumed: ("change_id", "c2"),
    policy_events.UserBanned: ("user_id", "u2"),
    policy_events.UserUnbanned: ("change_id", "c2"),
    policy_events.RateLimitSet: ("mode_category", "test"),
    policy_events.RateLimitCleared: ("leaderboard", "softmax"),
    policy_events.InvitesCreated: ("codes", ["k3"]),
    policy_events.InviteClaimed: ("code", "k2"),
    policy_events.InviteRevoked: ("code", "k2"),
    policy_events.LeaderboardVisibilityChanged: ("change_id", "c2"),
    precheck_events.PrecheckPolicySet: ("leaderboard", "softmax"),
    precheck_events.PrecheckCleared: ("change_id", "c2"),
    precheck_events.SubmissionReinstated: ("rejudge_id", "r2"),
}

CONTRACT_SAMPLES: dict[type[BaseModel], dict[str, Any]] = {
    contracts.PyConfig: dict(main="eval.py"),
    contracts.CuConfig: dict(sources=["eval.cu"]),
    contracts.RooflineCase: dict(bytes=25_165_824, flops=4_194_304, precision="fp16"),
    contracts.Task: TASK.model_dump(),
    contracts.RunPayload: dict(run_id="7.H100.test", gpu="H100", lang="py", mode="test"),
    contracts.SystemInfo: dict(gpu="H100", device_count=1),
    contracts.GpuFingerprint: dict(name="NVIDIA H100 80GB HBM3", uuid="GPU-1", driver="550.54.15",
                                   runtime_version="12.4", sm_clock_mhz=1755, power_limit_w=700.0, ecc="enabled"),
    contracts.CpuFingerprint: dict(model="AMD EPYC 9654", cores=192, governor="performance", frequency_mhz=3700.0),
    contracts.Fingerprint: dict(source="nvml", gpus=[dict(name="NVIDIA H100 80GB HBM3")], cpu=dict(cores=2)),
    contracts.TelemetrySample: dict(temperature_c=71, sm_clock_mhz=1410, throttle_reasons=["hw-thermal-slowdown"]),
    contracts.StageTelemetry: dict(source="nvml", before=[dict(temperature_c=60)], throttled=True,
                                   throttle_reasons=["sw-power-cap"]),
    contracts.CompileResult: dict(success=False, exit_code=1),
    contracts.RunResult: dict(success=True, passed=False, exit_code=112),
    contracts.ProfileResult: dict(profiler="ncu"),
    contracts.ProfileOptions: dict(benchmark_index=3, kernel_name="regex:^gemm", launch_count=4, launch_skip=2),
    contracts.EvalResult: dict(start="2025-03-01T12:00:00Z"),
    contracts.FullResult: RESULT.model_dump(),
}
PARTS: dict[type[BaseModel], dict[str, Any]] = {
    events.PlannedRun: dict(run_id="7.H100.public", gpu="H100", mode="leaderboard"),
    events.RankEntry: RANK_ENTRY,
    precheck_events.PrecheckFinding: dict(rule="fd-write", severity="high", message="writes to an inherited fd"),
    precheck_events.PrecheckVerdict: dict(outcome="warn", findings=[], detail="KernelGuard pre-check warning"),
}

CATALOGUE_IDS = [e.__name__ for e in events.CATALOGUE]


def _build(event_type: type[Event], at: datetime, **changes: Any) -> Event:
    return event_type(**(EVENT_FIELDS[event_type] | changes), occurred_at=at)


def test_every_event_and_contract_has_sample_data() -> None:
    assert set(EVENT_FIELDS) == set(events.CATALOGUE) == set(IDENTITY_CHANGE)
    assert set(CONTRACT_SAMPLES) == set(snapshots.contract_models())


# ------------------------------------------------------------------------------------------------- subjects

SUBJECT = re.compile(r"^evt\.[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")


@pytest.mark.parametrize("event_type", events.CATALOGUE, ids=CATALOGUE_IDS)
def test_subject_is_evt_entity_verb(event_type: type[Event]) -> None:
    assert SUBJECT.match(event_type.subject), f"{event_type.__name__}.subject = {event_type.subject!r}"


def test_subjects_are_unique_and_indexed() -> None:
    subjects = [e.subject for e in events.CATALOGUE]
    duplicates = sorted({s for s in subjects if subjects.count(s) > 1})
    assert not duplicates, f"subjects used by more than one event type: {duplicates}"
    assert len(set(events.CATALOGUE)) == len(events.CATALOGUE)
    assert {s: e for s, e in events.BY_SUBJECT.items()} == {e.subject: e for e in events.CATALOGUE}


# ----------------------------------------------------------------------------------------------- message id


@pytest.mark.parametrize("event_type", list(events.CATALOGUE), ids=lambda e: e.__name__)
def test_message_id_depends_only_on_business_fields(event_type: type[Event]) -> None:
    first = _build(event_type, T0)
    retried = _build(event_type, T0 + timedelta(hours=1, microseconds=17))
    assert first.occurred_at != retried.occurred_at
    assert first.message_id == retried.message_id
    assert first.event_id == first.message_id
    assert first.message_id.startswith(f"{event_type.__name__}:")


@pytest.mark.parametrize("event_type", events.CATALOGUE, ids=CATALOGUE_IDS)
def test_message_id_changes_with_business_identity(event_type: type[Event]) -> None:
    field, value = IDENTITY_CHANGE[event_type]
    assert _build(event_type, T0).message_id != _build(event_type, T0, **{field: value}).message_id


@pytest.mark.parametrize("event_type", events.CATALOGUE, ids=CATALOGUE_IDS)
def test_message_id_survives_the_wire(event_type: type[Event]) -> None:
    sent = _build(event_type, T0)
    received = event_type.model_validate_json(sent.model_dump_json())
    assert received == sent
    assert received.message_id == sent.message_id


def test_explicit_event_id_is_kept() -> None:
    event = _build(events.RunStarted, T0, event_id="RunStarted:fixed")
    assert event.message_id == "RunStarted:fixed"


def test_envelope_fields_and_utc_default() -> None:
    event = events.RunStarted(**EVENT_FIELDS[events.RunStarted])
    assert event.schema_version == 1
    assert event.occurred_at.utcoffset() == timedelta(0)
    assert {"event_id", "occurred_at", "correlation_id", "causation_id", "schema_version"} <= set(
        type(event).model_fields
    )


# ------------------------------------------------------------------------------------------ frozen / unknown

ALL_SAMPLES: list[tuple[type[BaseModel], dict[str, Any]]] = [
    *((e, EVENT_FIELDS[e] | {"occurred_at": T0}) for e in events.CATALOGUE),
    *CONTRACT_SAMPLES.items(),
    *PARTS.items(),
]
SAMPLE_IDS = [model.__name__ for model, _ in ALL_SAMPLES]


@pytest.mark.parametrize(("model", "fields"), ALL_SAMPLES, ids=SAMPLE_IDS)
def test_models_are_frozen(model: type[BaseModel], fields: dict[str, Any]) -> None:
    instance = model(**fields)
    name = next(iter(model.model_fields))
    with pytest.raises(ValidationError, match="frozen"):
        setattr(instance, name, getattr(instance, name))


@pytest.mark.parametrize(("model", "fields"), ALL_SAMPLES, ids=SAMPLE_IDS)
def test_unknown_fields_are_ignored_on_parse(model: type[BaseModel], fields: dict[str, Any]) -> None:
    known = model(**fields)
    data = json.loads(known.model_dump_json())
    data["field_from_a_newer_producer"] = {"anything": [1, 2]}
    parsed = model.model_validate_json(json.dumps(data))
    assert parsed == known
    assert "field_from_a_newer_producer" not in parsed.model_dump()
    assert not hasattr(parsed, "field_from_a_newer_producer")


def test_unknown_nested_fields_are_ignored() -> None:
    sent = _build(events.RunCompleted, T0)
    data = json.loads(sent.model_dump_json())
    data["result"]["runs"]["test"]["run"]["new_metric"] = 3
    data["result"]["system"]["new_probe"] = "x"
    assert events.RunCompleted.model_validate(data) == sent
