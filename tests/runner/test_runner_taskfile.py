from __future__ import annotations

import copy

import pytest
import yaml

from problems import PROBLEMS_ROOT, bundled_problem_dirs, competition_files
from runner.task.taskfile import TaskFileError, compute_task_hash, load_problem, render_case_file, render_case_line
from schemas.contracts import SUBMISSION_MARKER, CuConfig

VALID_TASK = {
    "files": [
        {"name": "submission.py", "source": "@SUBMISSION@"},
        {"name": "reference.py", "source": "reference.py"},
        {"name": "eval.py", "source": "../eval.py"},
    ],
    "lang": "py",
    "description": "A test problem.",
    "config": {"main": "eval.py"},
    "tests": [{"size": 8, "seed": 1}],
    "benchmarks": [{"size": 64, "seed": 2}],
}


def variant(**changes):
    task = copy.deepcopy(VALID_TASK)
    for key, value in changes.items():
        if value is None:
            task.pop(key, None)
        else:
            task[key] = value
    return task


def test_valid_task_loads_with_defaults(problem_checkout):
    directory = problem_checkout(variant(templates={"Python": "template.py"}, gpus=["cpu"]))
    loaded = load_problem(directory)
    assert loaded.description == "A test problem."
    assert loaded.templates == {"Python": "# template\n"}
    assert loaded.gpus == ["cpu"]
    task = loaded.task
    assert task.files == {"submission.py": SUBMISSION_MARKER, "reference.py": "# reference\n",
                          "eval.py": "# shared harness\n"}
    assert task.submission_file == "submission.py"
    assert (task.test_timeout, task.benchmark_timeout, task.ranked_timeout) == (180, 180, 180)
    assert (task.ranking_by, task.seed, task.multi_gpu, task.libraries) == ("last", None, False, [])
    assert loaded.task_hash == compute_task_hash(task)


def test_cu_task_loads(problem_checkout):
    files = [{"name": "submission.cu", "source": "@SUBMISSION@"}, {"name": "eval.cu", "source": "reference.py"}]
    config = {"sources": ["eval.cu", "submission.cu"], "defines": {"N": 4, "FAST": None},
              "compile_flags": ["-lineinfo"]}
    loaded = load_problem(problem_checkout(variant(lang="cu", files=files, config=config)))
    assert loaded.task.config == CuConfig(sources=["eval.cu", "submission.cu"], defines={"N": "4", "FAST": ""},
                                          compile_flags=["-lineinfo"])


def test_task_hash_ignores_the_submission_and_order():
    loaded = [load_problem(directory) for directory in bundled_problem_dirs()]
    hashes = {problem.task_hash for problem in loaded}
    assert len(hashes) == len(loaded)  # distinct problems, distinct hashes
    identity = next(problem for problem in loaded if problem.directory.name == "identity_py")
    task = identity.task
    reordered = task.model_copy(update={"files": dict(reversed(list(task.files.items())))})
    assert compute_task_hash(reordered) == identity.task_hash
    changed = task.model_copy(update={"files": {**task.files, "eval.py": task.files["eval.py"] + "#"}})
    assert compute_task_hash(changed) != identity.task_hash


BAD_TASKS = [
    (variant(colour="blue"), "colour"),
    (variant(description=None), "description"),
    (variant(lang="rust"), "lang"),
    (variant(test_timeout="60"), "test_timeout"),
    (variant(ranked_timeout=0), "ranked_timeout"),
    (variant(benchmark_timeout=True), "benchmark_timeout"),
    (variant(ranking_by="median"), "ranking_by"),
    (variant(seed=1.5), "seed"),
    (variant(multi_gpu="yes"), "multi_gpu"),
    (variant(files=[{"name": "a.py", "source": "reference.py"}]), "files"),
    (variant(files=VALID_TASK["files"] + [{"name": "b.py", "source": "@SUBMISSION@"}]), "files"),
    (variant(files=VALID_TASK["files"] + [{"name": "../x.py", "source": "reference.py"}]), "files[3].name"),
    (variant(files=VALID_TASK["files"] + [{"name": "/abs.py", "source": "reference.py"}]), "files[3].name"),
    (variant(files=VALID_TASK["files"] + [{"name": "x.py", "source": "../../../../outside.py"}]), "files[3].source"),
    (variant(files=VALID_TASK["files"] + [{"name": "x.py", "source": "missing.py"}]), "files[3].source"),
    (variant(files=VALID_TASK["files"] + [{"name": "x.py", "source": "reference.py", "mode": 1}]), "files[3].mode"),
    (variant(files=VALID_TASK["files"] + [{"name": "eval.py", "source": "reference.py"}]), "files[3].name"),
    (variant(config={"main": "main.py"}), "config.main"),
    (variant(config={"main": "eval.py", "sources": []}), "config.sources"),
    (variant(lang="cu", config={"sources": ["nope.cu"]}), "config.sources[0]"),
    (variant(lang="cu", config={"sources": ["eval.py"], "compile_flags": ["O3"]}), "config.compile_flags[0]"),
    (variant(lang="cu", config={"sources": ["eval.py"], "defines": {"1BAD": "x"}}), "config.defines"),
    (variant(templates={"Rust": "template.py"}), "templates.Rust"),
    (variant(templates={"Python": "../../../../t.py"}), "templates.Python"),
    (variant(tests=[{"size": 1.5}]), "tests[0].size"),
    (variant(tests=[{"dist": "a;b"}]), "tests[0].dist"),
    (variant(benchmarks=[{"size": 1}, "size: 2"]), "benchmarks[1]"),
    (variant(multi_gpu=True), "tests[0].world_size"),
    (variant(libraries="torch"), "libraries"),
    (variant(gpus=[3]), "gpus[0]"),
]


@pytest.mark.parametrize("task, field", BAD_TASKS, ids=[field for _, field in BAD_TASKS])
def test_invalid_task_names_file_and_field(problem_checkout, task, field):
    directory = problem_checkout(task)
    with pytest.raises(TaskFileError) as error:
        load_problem(directory)
    message = str(error.value)
    assert message.startswith(f"{directory / 'task.yml'}: ")
    assert field in message


def test_unparsable_yaml_and_missing_file_name_the_file(problem_checkout, tmp_path):
    directory = problem_checkout("files: [unclosed\n")
    with pytest.raises(TaskFileError, match="task.yml: invalid YAML"):
        load_problem(directory)
    with pytest.raises(TaskFileError, match="cannot read file"):
        load_problem(tmp_path / "nowhere")


def test_source_symlink_leaving_the_checkout_is_refused(problem_checkout, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    directory = problem_checkout(variant(files=VALID_TASK["files"] + [{"name": "x.py", "source": "link.py"}]))
    (directory / "link.py").symlink_to(secret)
    with pytest.raises(TaskFileError, match=r"files\[3\]\.source: .*outside the checkout root"):
        load_problem(directory)


def test_explicit_root_allows_sources_above_problems(problem_checkout, tmp_path):
    (tmp_path / "shared.py").write_text("# above problems/\n")
    task = variant(files=VALID_TASK["files"] + [{"name": "shared.py", "source": "../../../shared.py"}])
    directory = problem_checkout(task)
    with pytest.raises(TaskFileError):
        load_problem(directory)
    assert load_problem(directory, root=tmp_path).task.files["shared.py"] == "# above problems/\n"


def test_boolean_case_values_load_as_the_words_upstream_writes(problem_checkout):
    """amd_distributed's gemm-rs and ag-gemm (`has_bias: True`) and bioml's trimul (`nomask: False`)."""
    loaded = load_problem(problem_checkout(variant(tests=[{"m": 64, "has_bias": True, "nomask": False}])))
    assert loaded.task.tests == [{"m": 64, "has_bias": "True", "nomask": "False"}]
    assert render_case_line(loaded.task.tests[0]) == "m: 64; has_bias: True; nomask: False"


def test_case_lines_use_str_formatting_in_task_order():
    assert render_case_line({"size": 127, "seed": 4242}) == "size: 127; seed: 4242"
    assert render_case_line({"m": [96, 128], "g": 2, "case": "lapack_zero"}) == "m: [96, 128]; g: 2; case: lapack_zero"
    assert render_case_line({"seed": -3}) == "seed: -3"
    assert render_case_file([{"a": 1}, {"b": 2}]) == "a: 1\nb: 2\n"
    assert render_case_file([]) == ""


PY_EXAMPLES = ["grayscale_py", "identity_py", "matmul_py", "prefixsum_py", "softmax_py", "vectoradd_py"]


def test_bundled_problem_set_layout():
    assert [path.name for path in competition_files()] == ["cuda_examples.yaml", "examples.yaml"]
    assert sorted(path.name for path in bundled_problem_dirs()) == sorted([*PY_EXAMPLES, "vectoradd_cu"])
    for directory in bundled_problem_dirs():
        assert directory.is_relative_to(PROBLEMS_ROOT)
        loaded = load_problem(directory)
        suffix = ".py" if loaded.task.lang == "py" else ".cu"
        assert loaded.gpus == (["cpu"] if suffix == ".py" else ["H100"])
        assert ("Python" if suffix == ".py" else "CUDA") in loaded.templates
        assert 3 <= len(loaded.task.tests) <= 5 and 2 <= len(loaded.task.benchmarks) <= 3
        for kind in ("correct", "wrong"):
            assert 1 <= len(list((directory / "solutions" / kind).glob(f"*{suffix}"))) <= 2, (directory, kind)
        template = (directory / ("template" + suffix)).read_text()
        assert "custom_kernel" in template


def test_examples_yaml_lists_every_python_example_for_the_cpu_board():
    spec = yaml.safe_load((PROBLEMS_ROOT / "examples.yaml").read_text())
    entries = {entry["name"]: entry for entry in spec["problems"]}
    assert sorted(entries) == PY_EXAMPLES
    for name, entry in entries.items():
        assert entry == {"directory": f"examples/{name}", "name": name, "deadline": "2100-12-31", "gpus": ["cpu"]}
        assert load_problem(PROBLEMS_ROOT / entry["directory"]).task.lang == "py"
