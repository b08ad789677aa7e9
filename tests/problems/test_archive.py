"""Repository archives for sync: safe unpacking of zip and tar.gz, the problems/ root, the download URL; and the
CLI's archive of a checkout and its report lines."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from services.cli.problems import archive, report_lines
from services.core.problems import archive as problem_archive
from services.core.problems.archive import ArchiveError, archive_url, find_problems_root, unpack

FIXTURE = Path(__file__).parents[1] / "fixtures" / "reference_kernels"


def tar_gz(members: list[tuple[str, bytes | None, str | None]]) -> bytes:
    """(name, content, link target) members; content None with a target makes a symlink."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content, target in members:
            info = tarfile.TarInfo(name)
            if target is not None:
                info.type, info.linkname = tarfile.SYMTYPE, target
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def test_a_github_style_zip_unpacks_and_its_problems_root_is_found(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        zipped.writestr("reference-kernels-main/", "")
        zipped.writestr("reference-kernels-main/problems/set.yaml", "problems: []\n")
        zipped.writestr("reference-kernels-main/problems/set/p/task.yml", "lang: py\n")
    unpack(buffer.getvalue(), tmp_path)
    root = find_problems_root(tmp_path)
    assert root == tmp_path / "reference-kernels-main" / "problems"
    assert (root / "set" / "p" / "task.yml").read_text() == "lang: py\n"


@pytest.mark.parametrize("name", ["../evil.py", "/etc/evil.py", "problems/../../evil.py"])
def test_members_pointing_outside_are_refused(tmp_path, name):
    with pytest.raises(ArchiveError, match="points outside the archive"):
        unpack(tar_gz([(name, b"x", None)]), tmp_path / "out")
    assert not (tmp_path / "evil.py").exists()


def test_links_are_not_written_and_bounds_are_enforced(tmp_path, monkeypatch):
    unpack(tar_gz([("problems/a.yaml", b"problems: []\n", None), ("problems/link", None, "/etc/passwd")]), tmp_path)
    assert (tmp_path / "problems" / "a.yaml").exists() and not (tmp_path / "problems" / "link").exists()
    monkeypatch.setattr(problem_archive, "MAX_UNPACKED_BYTES", 10)
    with pytest.raises(ArchiveError, match="archive too large"):
        unpack(tar_gz([("problems/big.py", b"x" * 11, None)]), tmp_path / "big")
    with pytest.raises(ArchiveError, match="not a zip or tar archive"):
        unpack(b"definitely not an archive", tmp_path / "junk")
    with pytest.raises(ArchiveError, match="no problems/ directory"):
        find_problems_root(tmp_path / "big")


def test_the_download_url_quotes_what_it_fills_in():
    template = "https://codeload.github.com/{repository}/tar.gz/refs/heads/{branch}"
    assert archive_url(template, "gpu-mode/reference-kernels", "main") == (
        "https://codeload.github.com/gpu-mode/reference-kernels/tar.gz/refs/heads/main")
    assert archive_url(template, "a/b", "x?y#z").endswith("/heads/x%3Fy%23z")


def test_the_cli_archives_a_checkouts_text_files_under_problems_without_hidden_files_caches_and_binaries(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "problems" / "set" / "__pycache__").mkdir(parents=True)
    (checkout / "problems" / "set" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (checkout / "problems" / ".git").mkdir()
    (checkout / "problems" / ".git" / "HEAD").write_text("ref")
    (checkout / "problems" / "set.yaml").write_text("problems: []\n")
    (checkout / "problems" / "set" / "weights.pt").write_bytes(b"\x80\x02\xff binary")
    with tarfile.open(fileobj=io.BytesIO(archive(checkout / "problems")), mode="r:gz") as tar:
        assert tar.getnames() == ["problems/set.yaml"]
    with tarfile.open(fileobj=io.BytesIO(archive(FIXTURE / "problems")), mode="r:gz") as tar:
        assert "problems/pmpp_v2/vectoradd_py/task.yml" in tar.getnames()


def test_report_lines_mark_broken_problems_as_errors_and_count_everything():
    lines, failed = report_lines({"created": ["a"], "updated": ["b"], "skipped": [
        {"name": "c", "reason": "no changes"}, {"name": "d", "reason": "Failed to parse task.yml: x"}],
        "errors": [{"name": "e", "error": "create failed: boom"}]})
    assert lines == ["created  a", "updated  b", "skipped  c: no changes", "error    d: Failed to parse task.yml: x",
                     "error    e: create failed: boom", "1 created, 1 updated, 1 skipped, 2 errors"]
    assert failed
    assert report_lines({"created": [], "updated": [], "skipped": [{"name": "c", "reason": "no changes"}],
                         "errors": []})[1] is False


def test_a_summary_never_says_no_errors_when_the_command_fails():
    """What an organiser saw on reference-kernels' head: three broken problems, `0 errors`, exit 1."""
    lines, failed = report_lines({"created": ["a"], "updated": [], "errors": [], "skipped": [
        {"name": "amd-gemm-rs", "reason": "Failed to parse task.yml: bad"}]})
    assert failed and lines[-1] == "1 created, 0 updated, 0 skipped, 1 errors"
