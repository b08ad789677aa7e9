"""Every reference to the documentation in the code names a page of docs/ that exists and, where it quotes a section,
a heading of that page. The design notes the code once cited (`http-api.md §6`) are not in the repository, so a
citation of them, or a bare `§`, fails too.

A reference reads `docs/<page>.md`, optionally followed by quoted headings: `docs/http-api.md "Submitting"` or
`docs/http-api.md "Names", "Limits"`. Files are found by walking the tree, so moved modules are still checked."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FOLDERS = ("services", "runner", "schemas", "problems", "deploy", "scripts", "bench", "tests")
SUFFIXES = {".py", ".sh", ".yml", ".yaml", ".toml"}
SKIPPED = {"__pycache__", ".venv", "node_modules", ".git"}
# A page, then quoted headings, each after a comma, "and" or a line break inside a comment.
REFERENCE = re.compile(r'docs/(?P<page>[\w-]+\.md)(?P<headings>(?:(?:,|\s+and)?[ \t]*(?:\n[ \t]*#?[ \t]*)?"[^"\n]+")*)')
QUOTED = re.compile(r'"([^"\n]+)"')
# The design documents the code must no longer cite, unless as a docs/ page (or a file name in a string literal, as
# `DOCS / "http-api.md"`).
DESIGN_NOTE = re.compile(r"(?<![\w/.'\"-])(?:harness|http-api|architecture|user-needs)\.md\b")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")


def source_files() -> list[Path]:
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and not SKIPPED & set(path.relative_to(ROOT).parts) \
                    and path != Path(__file__).resolve():  # this file cites bad references on purpose
                found.append(path)
    return found


def plain(heading: str) -> str:
    """A heading as a reference may quote it: without backticks and without a leading `4. ` number."""
    return re.sub(r"^\d+\.\s+", "", heading.replace("`", "")).strip()


def headings_of(page: Path) -> set[str]:
    found, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (match := HEADING.match(line)):
            found.add(plain(match.group(1)))
    return found


def problems_in(text: str, pages: dict[str, set[str]]) -> list[str]:
    """What is wrong with the documentation references of one file's text, as messages."""
    problems = []
    for match in REFERENCE.finditer(text):
        page, line = match.group("page"), text.count("\n", 0, match.start()) + 1
        if page not in pages:
            problems.append(f"line {line}: docs/{page} does not exist")
            continue
        for quoted in QUOTED.findall(match.group("headings")):
            if plain(quoted) not in pages[page]:
                problems.append(f'line {line}: docs/{page} has no section "{quoted}"')
    for match in DESIGN_NOTE.finditer(text):
        problems.append(f"line {text.count(chr(10), 0, match.start()) + 1}: cites {match.group(0)}, which is not a "
                        "docs/ page (write docs/<page>.md)")
    for match in re.finditer("§", text):
        problems.append(f"line {text.count(chr(10), 0, match.start()) + 1}: a § section number of a design note")
    return problems


def pages() -> dict[str, set[str]]:
    return {page.name: headings_of(page) for page in DOCS.glob("*.md")}


def test_every_reference_in_the_code_names_a_page_and_section_that_exist():
    known = pages()
    files = source_files()
    assert len(files) > 300 and any(path.name == "policy.py" for path in files)
    problems = [f"{path.relative_to(ROOT)} {problem}" for path in files
                for problem in problems_in(path.read_text(encoding="utf-8", errors="replace"), known)]
    assert not problems, "\n".join(problems)


def test_the_check_catches_an_invented_page_or_section_and_a_design_note():
    known = pages()
    assert problems_in('"""Admission (docs/http-api.md "Submitting", "Names")."""', known) == []
    assert problems_in('# the floor (docs/operations.md,\n# "The floor under every score")', known) == []
    assert problems_in("see docs/authoring.md \"`task.yml`\" and docs/discord.md \"Commands\"", known) == []
    assert problems_in("see docs/no-such-page.md", known) == ["line 1: docs/no-such-page.md does not exist"]
    assert problems_in('x = 1\n# (docs/http-api.md "Submitting", "Invented section")', known) == [
        'line 2: docs/http-api.md has no section "Invented section"']
    assert len(problems_in('"""Checks follow http-api.md §6 in its order."""', known)) == 2
    assert len(problems_in("# the runner procedure (harness.md)", known)) == 1
