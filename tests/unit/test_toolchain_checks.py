"""What can be checked of the toolchain manifests without a GPU: every Python pin resolves to a wheel for its image's
platform and Python version (pip, without installing), and every header and source repository has its pinned tag
or commit (`kernelbot toolchain pins` / `sources`, docs/toolchains.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from runner.task.toolchain import FAMILIES, load, parse
from services.cli.toolchain_cmd import PYPI, check_pins, check_sources, reachable


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_every_pypi_pin_resolves_for_the_image_s_platform_and_python(family):
    toolchain = load(family)
    why = reachable(PYPI, "pip")
    if why:
        pytest.skip(f"PyPI not reachable from here: {why} (run `kernelbot toolchain pins` where it is)")
    rows = [row for row in check_pins(toolchain) if PYPI in row[2] or row[1] == "fail"]
    assert rows and all(state == "ok" for _, state, _ in rows), rows


def test_the_rocm_index_pins_resolve_where_that_index_answers():
    amd = load("amd")
    why = reachable(amd.index_url or "", "torch")
    if why:
        pytest.skip(f"PyTorch's ROCm index is not reachable from here: {why}")
    rows = [row for row in check_pins(amd) if row[0].split("==")[0] in amd.index_packages]
    assert rows and all(state == "ok" for _, state, _ in rows), rows


def test_a_pin_that_does_not_exist_fails_the_check():
    why = reachable(PYPI, "pip")
    if why:
        pytest.skip(f"PyPI not reachable from here: {why}")
    bogus = parse('family = "nvidia"\nversion = "1"\npython = "3.12"\nlanguages = ["py"]\n[system]\n'
                  'base_image = "x"\n[pip]\nnumpy = "0.0.999"\n[modules]\nprovided = []\n', "bogus.toml")
    [(requirement, state, detail)] = check_pins(bogus)
    assert (requirement, state) == ("numpy==0.0.999", "fail") and detail


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def test_header_refs_are_checked_against_a_clone(tmp_path):
    clone = tmp_path / "headers"
    clone.mkdir()
    git("init", "-q", cwd=clone)
    (clone / "a.h").write_text("// header\n")
    git("add", "a.h", cwd=clone)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one", cwd=clone)
    git("tag", "v1.0", cwd=clone)
    commit = git("rev-parse", "HEAD", cwd=clone)
    manifest = ('family = "nvidia"\nversion = "1"\npython = "3.12"\nlanguages = ["py"]\n[system]\nbase_image = "x"\n'
                '[pip]\n[modules]\nprovided = []\n'
                '[[headers]]\nname = "tagged"\nrepository = "r"\ntag = "{tag}"\npath = "/a"\n'
                '[[headers]]\nname = "pinned"\nrepository = "r"\ncommit = "{commit}"\npath = "/b"\n')
    local = {"tagged": clone / ".git", "pinned": clone / ".git"}
    good = parse(manifest.format(tag="v1.0", commit=commit), "good.toml")
    assert [state for _, state, _ in check_sources(good, local)] == ["ok", "ok"]
    bad = parse(manifest.format(tag="v9.9", commit="0" * 40), "bad.toml")
    assert [(subject, state) for subject, state, _ in check_sources(bad, local)] == [
        ("tagged@v9.9", "fail"), (f"pinned@{'0' * 40}", "fail")]
