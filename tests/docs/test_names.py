"""Every name the README and docs/ give a reader exists in the code: each `KB_*` setting (a field of a settings class,
or a variable the code reads), each `kernelbot` command, subcommand and option, and each HTTP route (a route of the
gateway app, matched as a request would be). Each check also fails on a name invented for the purpose."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cli.main import app
from services.gateway.app import create_app
from services.gateway.settings import GatewaySettings
from services.kit import settings as kit

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SKIPPED = {"__pycache__", ".venv", "node_modules", ".git"}
KB_NAME = re.compile(r"\bKB_[A-Z0-9_]*[A-Z0-9]\b")
# The code a reader reads settings from. Tests are left out: a test may name a variable nothing reads.
SETTINGS_FOLDERS = ("services", "runner", "schemas", "scripts", "problems", "bench", "deploy")
CODE_SPAN = re.compile(r"```[^\n]*\n(.*?)```|`([^`\n]+)`", re.S)
COMMAND = re.compile(r"(?:^|(?<=[\s/(]))kernelbot[)\"']*[ \t]+([a-z][a-z0-9-]*)(?:[ \t]+([a-z][a-z0-9-]*))?([^\n|]*)")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
ROUTE = re.compile(r"\b(GET|POST|PUT|DELETE|PATCH)[ \t]+(/[^\s`|,;)\"']*)")
BARE_PATH = re.compile(r"`(/[a-z_][^\s`]*)`")
PARAMETER = re.compile(r"\{[^}/]*\}|<[^>/]*>")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def page_texts() -> dict[str, str]:
    return {str(page.relative_to(ROOT)): page.read_text(encoding="utf-8") for page in pages()}


def code_files(suffixes: set[str]) -> Iterator[Path]:
    for folder in SETTINGS_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in suffixes \
                    and not SKIPPED & set(path.relative_to(ROOT).parts):
                yield path


# --- KB_* settings ----------------------------------------------------------------------------------------------

def settings_fields(trees: list[ast.Module]) -> set[str]:
    """`KB_<FIELD>` for every field of a class that is, through its bases, a pydantic BaseSettings."""
    classes = [node for tree in trees for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    settings = {"BaseSettings"}
    grew = True
    while grew:
        grew = False
        for cls in classes:
            bases = {base.id if isinstance(base, ast.Name) else getattr(base, "attr", "") for base in cls.bases}
            if cls.name not in settings and bases & settings:
                settings.add(cls.name)
                grew = True
    return {f"KB_{statement.target.id.upper()}" for cls in classes if cls.name in settings
            for statement in cls.body
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
            and statement.target.id != "model_config"}


def read_variables(trees: list[ast.Module]) -> set[str]:
    """Every string constant of the code that is exactly a KB_* name: what os.environ[...] and the like read."""
    return {node.value for tree in trees for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and KB_NAME.fullmatch(node.value)}


def script_reads() -> set[str]:
    """KB_* variables that shell scripts read (`$KB_X`, `${KB_X...}`)."""
    return {name for path in code_files({".sh"})
            for name in re.findall(r"\$\{?(KB_[A-Z0-9_]*[A-Z0-9])\b", path.read_text(encoding="utf-8"))}


@pytest.fixture(scope="module")
def known_settings() -> set[str]:
    trees = [ast.parse(path.read_text(encoding="utf-8")) for path in code_files({".py"})]
    return settings_fields(trees) | read_variables(trees) | script_reads()


def unknown_settings(texts: dict[str, str], known: set[str]) -> list[str]:
    return [f"{page}: {name}" for page, text in texts.items() for name in sorted(set(KB_NAME.findall(text)))
            if name not in known]


def test_every_kb_setting_a_page_names_is_read_by_the_code(known_settings: set[str]):
    assert {"KB_ADMIN_TOKEN", "KB_METRICS_PORT", "KB_RUNS_DIR", "KB_STOCK_EVAL_SHA256"} <= known_settings
    assert not (problems := unknown_settings(page_texts(), known_settings)), "\n".join(problems)


def test_an_invented_setting_is_caught(known_settings: set[str]):
    assert unknown_settings({"page.md": "set `KB_ADMIN_TOKEN` and `KB_NO_SUCH_SETTING`"}, known_settings) == [
        "page.md: KB_NO_SUCH_SETTING"]
    # a field of a class that is not a settings class names no variable
    tree = ast.parse("class Settings(BaseSettings):\n    port: int\nclass Other(Base):\n    colour: str\n"
                     "class Gateway(Settings):\n    host: str\n")
    assert settings_fields([tree]) == {"KB_PORT", "KB_HOST"}


# --- kernelbot commands -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cli():
    import typer


    return typer.main.get_command(app)


def code_of(text: str) -> Iterator[str]:
    """The text of every code block and inline code span of a page: where a page names commands and routes."""
    for match in CODE_SPAN.finditer(text):
        yield match.group(1) if match.group(1) is not None else match.group(2)


def options_of(command) -> set[str]:
    return {option for param in command.params for option in (*param.opts, *param.secondary_opts)} | {"--help"}


def command_problems(texts: dict[str, str], cli) -> list[str]:
    problems = []
    for page, text in texts.items():
        for code in code_of(text):
            for name, sub, rest in COMMAND.findall(code):
                said = f"{page}: kernelbot {name}"
                command = cli.commands.get(name)
                if command is None:
                    problems.append(f"{said}: no such command")
                    continue
                tail = rest
                if hasattr(command, "commands"):  # a group: the next word is a subcommand
                    if not sub:
                        continue
                    command = command.commands.get(sub)
                    if command is None:
                        problems.append(f"{said} {sub}: no such subcommand")
                        continue
                    said = f"{said} {sub}"
                elif sub:
                    tail = f" {sub}{rest}"
                for option in OPTION.findall(tail.split("&&")[0].split(";")[0]):
                    if option not in options_of(command):
                        problems.append(f"{said}: no option {option}")
    return problems


def test_every_kernelbot_command_a_page_names_exists_with_its_options(cli):
    texts = page_texts()
    assert sum(len(COMMAND.findall(code)) for text in texts.values() for code in code_of(text)) > 50
    assert not (problems := command_problems(texts, cli)), "\n".join(problems)


def test_an_invented_command_subcommand_or_option_is_caught(cli):
    page = ("Run `kernelbot rejudge --leaderboard x --rescore`, then\n```bash\n.venv/bin/kernelbot events replay all\n"
            "kernelbot rejudge --sideways\nkernelbot events rewind\nkernelbot teleport now\n```\n"
            "and `sudo \"$(command -v kernelbot)\" host-check --json`.")
    assert command_problems({"page.md": page}, cli) == [
        "page.md: kernelbot rejudge: no option --sideways",
        "page.md: kernelbot events rewind: no such subcommand",
        "page.md: kernelbot teleport: no such command",
    ]


# --- HTTP routes ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gateway():

    return create_app(GatewaySettings(nats_url=kit.DEFAULT_NATS_URL, database_url=kit.DEFAULT_DATABASE_URL))


def concrete(path: str) -> str:
    """The request path of a documented path: parameters filled in, the query and trailing punctuation dropped."""
    return PARAMETER.sub("x1", path.split("?")[0]).rstrip(".:")


def answers(app, method: str, path: str) -> bool:
    from starlette.routing import Match

    scope = {"type": "http", "method": method, "path": path, "root_path": "", "query_string": b"", "headers": []}
    return any(route.matches(scope)[0] == Match.FULL for route in app.routes)


def begins_a_route(prefix: str, methods: set[str], operations: set[tuple[str, str]]) -> bool:
    """Some operation of the OpenAPI document has a path below `prefix` (`/admin/*`, `/submission/...`, `/gpus`)."""
    prefix = PARAMETER.sub("x1", prefix).rstrip("/") + "/"
    return any(method in methods and path.startswith(prefix) for method, path in operations)


def route_problems(texts: dict[str, str], app, operations: set[tuple[str, str]]) -> list[str]:
    first_segments = {path.strip("/").split("/")[0] for _, path in operations if not path.startswith("/x1")}
    problems = []
    for page, text in texts.items():
        said = set()
        for method, path in ROUTE.findall(text):
            said.add(path)
            wildcard = re.search(r"/(?:\.\.\.|\*)$", path)
            if not (begins_a_route(path[:wildcard.start()], {method}, operations) if wildcard
                    else answers(app, method, concrete(path))):
                problems.append(f"{page}: {method} {path}")
        for path in BARE_PATH.findall(text):
            if path in said or path.strip("/").split("/")[0] not in first_segments:
                continue  # a file path, or a route already checked with its method
            methods = {"GET", "POST", "PUT", "DELETE", "PATCH"}
            base = re.sub(r"/(?:\.\.\.|\*)$", "", path)
            if not (any(answers(app, method, concrete(path)) for method in methods)
                    or begins_a_route(base, methods, operations)):
                problems.append(f"{page}: {path}")
    return problems


@pytest.fixture(scope="module")
def operations() -> set[tuple[str, str]]:
    """(method, path) of every operation of the committed OpenAPI document, parameters filled in."""
    document = json.loads((DOCS / "openapi.json").read_text(encoding="utf-8"))
    return {(method.upper(), concrete(path)) for path, item in document["paths"].items() for method in item}


def test_every_route_a_page_names_is_a_route_of_the_gateway(gateway, operations: set[tuple[str, str]]):
    texts = page_texts()
    assert sum(len(ROUTE.findall(text)) for text in texts.values()) > 40
    assert not (problems := route_problems(texts, gateway, operations)), "\n".join(problems)


def test_an_invented_route_or_method_is_caught(gateway, operations: set[tuple[str, str]]):
    page = ("`GET /user/submissions/{id}`, `POST /submission/...`, `GET /ready`, `PUT /admin/leaderboards/<name>/precheck`"
            ", `/admin/*` and `/auth/cli/{provider}` exist; `DELETE /admin/start`, `GET /admin/teleport`, "
            "`POST /teleport/...` and `/user/nothing/here` do not; `/proc/self` is a file.")
    assert route_problems({"page.md": page}, gateway, operations) == [
        "page.md: DELETE /admin/start", "page.md: GET /admin/teleport", "page.md: POST /teleport/...",
        "page.md: /user/nothing/here"]


def test_the_openapi_document_declares_the_idempotency_key_the_http_page_documents():
    document = json.loads((DOCS / "openapi.json").read_text(encoding="utf-8"))
    assert "`Idempotency-Key`" in (DOCS / "http-api.md").read_text(encoding="utf-8")
    submits = [operation for path, item in document["paths"].items() for method, operation in item.items()
               if method == "post" and path.startswith(("/submission/", "/admin/submission/"))]
    assert len(submits) == 2
    for operation in submits:
        headers = {p["name"].lower() for p in operation.get("parameters", []) if p.get("in") == "header"}
        assert "idempotency-key" in headers, operation.get("operationId")
