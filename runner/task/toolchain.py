"""The runner images' toolchain manifests (runner/toolchains/*.toml, docs/toolchains.md): one per vendor family.

A manifest pins everything its image carries. Its hash names the image (`kernelbot-runner:<family>-toolchain-<hash>`)
and is baked into the image as KB_TOOLCHAIN_SHA256; the dispatcher puts `<family>:<hash>` of the manifest it knows
into each payload, and the runner refuses a payload whose expected toolchain is not the one it was built with.
Pure: reading the manifest files is the only I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

MANIFEST_DIR = Path(__file__).resolve().parent.parent / "toolchains"  # runner/toolchains/, data beside the package
FAMILIES = ("nvidia", "amd")
IMAGE_REPOSITORY = "kernelbot-runner"
# Where the image says what it was built from (deploy/runner/*Dockerfile set them from the manifest).
FAMILY_ENV, HASH_ENV = "KB_TOOLCHAIN", "KB_TOOLCHAIN_SHA256"
# AMD GPU names as reference-kernels and the catalogue spell them: MI300, MI300x8, MI355X, mi250.
AMD_NAME = re.compile(r"(?i)(^|[-_])mi\d")


class ToolchainError(ValueError):
    """A manifest that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Toolchain:
    family: str
    data: Mapping[str, Any]

    @property
    def version(self) -> str:
        return str(self.data["version"])

    @property
    def python(self) -> str:
        return str(self.data["python"])

    @property
    def sha256(self) -> str:
        return manifest_sha256(self.data)

    @property
    def short_hash(self) -> str:
        return self.sha256[:12]

    @property
    def languages(self) -> tuple[str, ...]:
        return tuple(self.data["languages"])

    @property
    def provided_modules(self) -> frozenset[str]:
        return frozenset(self.data["modules"]["provided"])

    @property
    def system(self) -> Mapping[str, Any]:
        return self.data["system"]

    @property
    def pins(self) -> dict[str, str]:
        """`name[extras]` -> exact version, in manifest order."""
        return dict(self.data["pip"])

    @property
    def index_packages(self) -> frozenset[str]:
        """Distributions that come from the manifest's own wheel index rather than PyPI."""
        return frozenset(self.data.get("pip_index", {}).get("packages", ()))

    @property
    def index_url(self) -> str | None:
        return self.data.get("pip_index", {}).get("url")

    def requirements(self, names: Iterable[str] | None = None) -> list[str]:
        """`name[extras]==version` lines, for every pin or for the named distributions only."""
        wanted = None if names is None else set(names)
        return [f"{spec}=={version}" for spec, version in self.pins.items()
                if wanted is None or distribution(spec) in wanted]

    @property
    def headers(self) -> list[Mapping[str, Any]]:
        return list(self.data.get("headers", ()))

    @property
    def sources(self) -> list[Mapping[str, Any]]:
        return list(self.data.get("sources", ()))

    @property
    def archives(self) -> list[Mapping[str, Any]]:
        return list(self.data.get("archives", ()))

    def include_dirs(self) -> list[str]:
        return [f"{item['path']}/{sub}" for item in [*self.archives, *self.headers] for sub in item.get("include", ())]

    def image_tags(self) -> tuple[str, str]:
        """The tags a published image carries: by the manifest's version and by its hash."""
        return f"{self.family}-{self.version}", f"{self.family}-toolchain-{self.short_hash}"

    def expected(self) -> str:
        """What a payload carries to say which image it needs."""
        return f"{self.family}:{self.sha256}"


def distribution(spec: str) -> str:
    """`nvmath-python[cu13-dx]` -> `nvmath-python`."""
    return spec.split("[", 1)[0]


def manifest_sha256(data: Mapping[str, Any]) -> str:
    """The hash of a manifest's content (not its comments or layout), stable across readers."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


REQUIRED = ("family", "version", "python", "languages", "system", "pip", "modules")


def parse(text: str, where: str) -> Toolchain:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ToolchainError(f"{where}: not valid TOML: {exc}") from exc
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise ToolchainError(f"{where}: missing {', '.join(missing)}")
    for spec, version in data["pip"].items():
        if not isinstance(version, str) or not version or any(c in version for c in "<>=~*,"):
            raise ToolchainError(f"{where}: pip.{spec}: pin one exact version, got {version!r}")
    for item in [*data.get("headers", ()), *data.get("sources", ())]:
        if not (item.get("tag") or re.fullmatch(r"[0-9a-f]{40}", item.get("commit", ""))):
            raise ToolchainError(f"{where}: {item.get('name')}: pin a tag or a full 40-hex commit")
    return Toolchain(str(data["family"]), data)


@cache
def load(family: str) -> Toolchain:
    path = MANIFEST_DIR / f"{family}.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolchainError(f"no toolchain manifest for {family!r}: {exc}") from exc
    toolchain = parse(text, str(path))
    if toolchain.family != family:
        raise ToolchainError(f"{path}: family is {toolchain.family!r}, not {family!r}")
    return toolchain


def family_for_gpu(name: str, backend: str, target: str = "", queues: Iterable[str] = ()) -> str | None:
    """Which image serves a catalogue entry; None for the `local` and `null` backends, which run no image."""
    if backend in ("local", "null"):
        return None
    amd = AMD_NAME.search(name) or "amd" in target.lower() or any(q.startswith("amd") for q in queues)
    return "amd" if amd else "nvidia"


def refusal(expected: str | None, environ: Mapping[str, str]) -> str | None:
    """One line when this image is not the one the payload expects; None when it is, or when either side does not
    say (a runner outside an image, such as a Slurm venv, carries no hash)."""
    built = environ.get(HASH_ENV, "")
    if not expected or not built:
        return None
    family, _, wanted = expected.partition(":")
    have = f"{environ.get(FAMILY_ENV, '?')}:{built}"
    if expected == have:
        return None
    return (f"runner image toolchain mismatch: this image was built from the {have.split(':')[0]} manifest "
            f"{built[:12]}, the platform expects {family} {wanted[:12]}; pull "
            f"{IMAGE_REPOSITORY}:{family}-toolchain-{wanted[:12]} (deploy/buildkite/update-image.sh)")
