"""The dependency rules of docs/security.md: images install from hash-checked locks that satisfy pyproject.toml, the
service lock carries no torch, and every library whose private attributes we use is pinned to a tested release."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "deploy" / "requirements"
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s\\;]+)", re.MULTILINE)


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def locked(name: str) -> dict[str, str]:
    text = (LOCKS / name).read_text(encoding="utf-8")
    return {canonical(package): pinned for package, pinned in PIN.findall(text)}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def unmet(requirements: list[str], pins: dict[str, str]) -> list[str]:
    problems = []
    for line in requirements:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        pinned = pins.get(canonical(requirement.name))
        if pinned is None:
            problems.append(f"{requirement.name}: not in the lock")
        elif not requirement.specifier.contains(pinned, prereleases=True):
            problems.append(f"{requirement.name}: locked {pinned}, pyproject asks {requirement.specifier}")
    return problems


def test_the_service_lock_satisfies_every_base_dependency():
    assert unmet(project()["dependencies"], locked("services.txt")) == []


def test_the_service_lock_carries_no_runner_library():
    pins = locked("services.txt")
    assert not [name for name in pins if name == "torch" or name.startswith(("nvidia-", "triton"))]


def test_the_runner_lock_satisfies_its_inputs():
    inputs = [line.split("#")[0].strip() for line in (LOCKS / "runner.in").read_text().splitlines()]
    assert unmet([line for line in inputs if line], locked("runner.txt")) == []


@pytest.mark.parametrize("lock", ["services.txt", "runner.txt"])
def test_every_locked_package_has_a_hash(lock):
    entries = re.split(r"\n(?=[A-Za-z0-9])", (LOCKS / lock).read_text(encoding="utf-8"))
    packages = [entry for entry in entries if PIN.match(entry)]
    assert packages and all("--hash=sha256:" in entry for entry in packages)


@pytest.mark.parametrize(("dockerfile", "lock"), [("deploy/Dockerfile", "services.txt"),
                                                 ("deploy/runner/Dockerfile", "runner.txt")])
def test_images_install_from_their_lock(dockerfile, lock):
    text = (ROOT / dockerfile).read_text(encoding="utf-8")
    assert f"deploy/requirements/{lock}" in text and "--require-hashes" in text
    installs = [line for line in text.splitlines() if "pip install" in line]
    if dockerfile == "deploy/Dockerfile":
        assert not [line for line in installs if "torch" in line or "[runner" in line]


def test_runner_only_libraries_sit_in_the_runner_extra():
    base = {canonical(Requirement(line).name) for line in project()["dependencies"]}
    assert "torch" not in base and "nvidia-ml-py" not in base
    assert {"torch", "nvidia-ml-py"} <= {canonical(Requirement(line).name)
                                         for line in project()["optional-dependencies"]["runner"]}


# Libraries whose private attributes we use, with where: a new release is taken only by changing the exact pin,
# which makes these and the behaviour tests of those places (tests/kit/test_fair_pool.py, the consumer tests
# against a real NATS) run against it.
PRIVATE_API_PINS = {"asyncpg": "services/kit/fair_pool.py", "nats-py": "services/kit/deadletter.py, bus.py",
                    "faststream": "services/kit/runtime.py, ride_out.py"}


@pytest.mark.parametrize("package", sorted(PRIVATE_API_PINS))
def test_private_api_users_are_pinned_exactly_and_installed_as_pinned(package):
    requirement = next(Requirement(line) for line in project()["dependencies"]
                       if canonical(Requirement(line).name) == package)
    specs = list(requirement.specifier)
    assert len(specs) == 1 and specs[0].operator == "==", f"{package} must be pinned with ==: {requirement}"
    assert version(package) == specs[0].version


def test_the_private_attributes_we_use_still_exist():
    from asyncpg.pool import Pool, PoolConnectionHolder, PoolConnectionProxy
    from nats.aio.msg import Msg
    from nats.js.client import JetStreamContext

    assert callable(Pool._acquire) and callable(Pool.release)
    assert {"_holder", "_con"} <= set(PoolConnectionProxy.__slots__)
    assert "_pool" in PoolConnectionHolder.__slots__
    assert {"_client", "_ackd"} <= {field.name for field in dataclasses.fields(Msg)}
    assert callable(JetStreamContext.PullSubscription.fetch)
    from faststream.nats.subscriber.usecases.basic import LogicSubscriber

    assert callable(LogicSubscriber._create_subscription)  # wrapped by services/kit/ride_out.py
