"""The documentation site: `mkdocs build --strict` passes, its generated sections follow the code, and neither the
README nor the docs point outside the repository."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from schemas.envelope import Event
from schemas.events import CATALOGUE
from schemas.streams import ALL_STREAMS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = ("index", "quickstart", "authoring", "vendors", "architecture", "http-api", "operations", "discord")
# The design notes live outside the repository; nobody who clones it has them.
OUTSIDE = re.compile(r"\.\./shared|shared/design|\bdesign/[a-z-]+\.md")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
EXTERNAL = re.compile(r"<(?:link|script|img)\b[^>]*\b(?:href|src)=\"(?:https?:)?//", re.IGNORECASE)

if str(ROOT / "scripts") not in sys.path:
    sys.path.insert(0, str(ROOT / "scripts"))


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)


def text_of(page: Path) -> str:
    """A built page's visible text, tags dropped and entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    done = build(ROOT / "mkdocs.yml", target)
    assert done.returncode == 0, done.stdout + done.stderr
    return target


def test_the_site_builds_strictly_with_every_page(site: Path):
    for page in PAGES:
        built = site / ("index.html" if page == "index" else f"{page}/index.html")
        assert built.is_file(), page
    assert "Quickstart" in text_of(site / "index.html")
    # read offline too: no page pulls a script, stylesheet or font from the network
    for page in site.rglob("*.html"):
        assert not EXTERNAL.search(page.read_text(encoding="utf-8")), page.relative_to(site)


@pytest.mark.parametrize("damage", ["broken link", "page outside the nav", "missing anchor"])
def test_the_strict_build_fails_on_broken_docs(tmp_path: Path, damage: str):
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    if damage == "broken link":
        (docs / "index.md").write_text((docs / "index.md").read_text() + "\n[gone](nowhere.md)\n")
    elif damage == "page outside the nav":
        (docs / "stray.md").write_text("# Stray\n")
    else:
        (docs / "index.md").write_text((docs / "index.md").read_text() + "\n[gone](quickstart.md#no-such-part)\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {docs}\n"
                      f"hooks:\n  - {ROOT / 'scripts' / 'docgen' / 'hooks.py'}\n")
    done = build(config, tmp_path / "site")
    assert done.returncode != 0, done.stdout + done.stderr
    assert {"broken link": "nowhere.md", "page outside the nav": "stray.md",
            "missing anchor": "no-such-part"}[damage] in done.stdout + done.stderr


def test_the_architecture_page_lists_every_event_stream_and_table(site: Path):

    page = text_of(site / "architecture" / "index.html")
    for event in CATALOGUE:
        assert event.__name__ in page and event.subject in page, event.__name__
        for field in event.model_fields:
            assert field in page, (event.__name__, field)
    for stream in ALL_STREAMS:
        assert stream.name in page
    created = {name.lower() for path in (ROOT / "migrations").glob("*.sql")
               for name in re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)", path.read_text(), re.IGNORECASE)}
    assert created and all(name in page for name in created), created - set(page.split())


def test_the_http_page_lists_every_operation_of_the_committed_document(site: Path):
    document = json.loads((DOCS / "openapi.json").read_text(encoding="utf-8"))
    page = text_of(site / "http-api" / "index.html")
    operations = [(method.upper(), path) for path, item in document["paths"].items() for method in item]
    assert len(operations) > 20
    for method, path in operations:
        assert f"{method} {path}" in page, (method, path)


def test_the_catalogue_is_generated_from_the_event_types():
    from docgen import catalogue


    class Nested(BaseModel):
        gadget: str

    class WidgetPolished(Event):
        """A widget shone."""

        subject = "evt.widget.polished"
        widget_id: int
        parts: list[Nested] = []

        def identity(self) -> str:
            return f"{self.widget_id}:{self.parts}"

    section = catalogue.render([WidgetPolished], DOCS / "asyncapi", ROOT / "services", Event)
    assert "#### WidgetPolished" in section and "`evt.widget.polished`" in section and "A widget shone." in section
    assert "`WidgetPolished:{widget_id}:{parts}`" in section
    assert "| `widget_id` | `int` | required |" in section
    assert "#### Nested" in section and "| `gadget` | `str` | required |" in section
    # the ledger's durable consumer takes every subject under evt.>
    assert "ledger (`ledger-project`)" in section


def test_an_unknown_generated_section_stops_the_build():
    from docgen import hooks
    from mkdocs.exceptions import PluginError

    with pytest.raises(PluginError, match="no-such-section"):
        hooks.expand("# Page\n\n<!-- generated: no-such-section -->\n", DOCS, "page.md")


def test_readme_and_docs_never_point_outside_the_repository():
    files = [ROOT / "README.md", ROOT / "mkdocs.yml",
             *sorted(p for p in DOCS.rglob("*") if p.suffix in {".md", ".json", ".yml", ".yaml", ".txt"})]
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not OUTSIDE.search(text), f"{path.relative_to(ROOT)} points outside the repository"
        if path.suffix != ".md":
            continue
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:|#", target):
                continue
            resolved = (path.parent / target.split("#")[0]).resolve()
            assert resolved.is_relative_to(ROOT) and resolved.exists(), f"{path.relative_to(ROOT)}: {target}"


def test_the_readme_keeps_its_two_commands():
    # CI (.ci/run) and a newcomer both follow these exactly.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python3.11 -m venv .venv && .venv/bin/pip install -e '.[runner]' && .venv/bin/kernelbot up" in readme
    assert "python3.11 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest" in readme
    assert "(docs/index.md)" in readme


def test_ci_runs_the_readmes_test_command_and_then_the_slow_tests():
    """The README's command leaves the `slow` tests out; CI runs them after it, so none is skipped before landing."""
    steps = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
             if line.strip().startswith(".venv/bin/python -m pytest")]
    assert steps == [".venv/bin/python -m pytest", ".venv/bin/python -m pytest -m slow"]


def test_the_smallest_harness_of_the_authoring_page_runs(tmp_path: Path):
    """The protocol sketch on the authoring page is a harness the real runner accepts."""
    page = (DOCS / "authoring.md").read_text(encoding="utf-8")
    [harness] = [block for block in re.findall(r"```python\n(.*?)```", page, re.DOTALL) if "POPCORN_FD" in block]
    problem = tmp_path / "problems" / "sketch"
    problem.mkdir(parents=True)
    (problem / "eval.py").write_text(harness)
    (problem / "task.yml").write_text(
        "files:\n  - {name: submission.py, source: '@SUBMISSION@'}\n  - {name: eval.py, source: eval.py}\n"
        "lang: py\ndescription: sketch\nconfig: {main: eval.py}\ntests:\n  - {size: 1, seed: 1}\n"
        "  - {size: 2, seed: 2}\n")
    submission = tmp_path / "submission.py"
    submission.write_text("def custom_kernel(data):\n    return data\n")
    done = subprocess.run([sys.executable, "-m", "services.cli", "run-local", str(submission), "--problem",
                           str(problem)], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✅ Passed 2/2 tests" in done.stdout and "size: 2; seed: 2" in done.stdout
