"""The Python-harness side of the conformance checks: small tasks built in memory around our harness
(problems/examples) whose inputs live on the GPU when there is one, and the submissions run against them."""

from __future__ import annotations

from problems import PROBLEMS_ROOT
from schemas.contracts import SUBMISSION_MARKER, PyConfig, Task

HARNESS_FILES = ("eval.py", "harness_supervisor.py", "harness_measure.py", "harness_batch.py", "harness_group.py",
                 "harness_worker.py", "harness_wire.py")

VECTORADD_REFERENCE = '''
import torch


def generate_input(size: int, seed: int):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    generator = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(size, device=device, generator=generator),
            torch.randn(size, device=device, generator=generator))


def check_implementation(data, output):
    a, b = data
    expected = a + b
    if type(output) is not torch.Tensor or output.shape != expected.shape or output.device != expected.device:
        return False, "expected a torch.Tensor of the input's shape on the input's device"
    if not torch.allclose(output, expected, rtol=1e-5, atol=1e-6):
        return False, "mismatched elements"
    return True, ""
'''

ALL_REDUCE_REFERENCE = '''
import torch


def generate_input(size: int, seed: int, world_size: int, rank: int):
    device = f"cuda:{rank}" if torch.cuda.is_available() else "cpu"
    base = torch.randn(size, generator=torch.Generator().manual_seed(seed)).to(device)
    return base * (rank + 1), rank, world_size


def check_implementation(data, output):
    tensor, rank, world_size = data
    expected = tensor / (rank + 1) * (world_size * (world_size + 1) / 2)
    if type(output) is not torch.Tensor or output.shape != expected.shape:
        return False, "wrong output type or shape"
    if not torch.allclose(output.to(expected.device), expected, rtol=1e-5, atol=1e-5):
        return False, "not the sum over ranks"
    return True, ""
'''

CORRECT = '''
def custom_kernel(data):
    a, b = data
    return a + b
'''

FAKE_EVENTS = '''
import torch


class _OneNanosecond:
    def __init__(self, *args, **kwargs):
        pass

    def record(self, *args, **kwargs):
        pass

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return 1e-6


torch.cuda.Event = _OneNanosecond


def custom_kernel(data):
    a, b = data
    return a + b
'''

# The same slow work, on the stream the harness times (honest) and on a side stream returned from at once.
SLOW_WORK = '''
import torch

_side = None


def work(a, b):
    out = a + b
    for _ in range(200):
        out = out * 1.0000001 - out * 0.0000001
    return out
'''
SAME_STREAM = SLOW_WORK + '''

def custom_kernel(data):
    return work(*data)
'''
SIDE_STREAM = SLOW_WORK + '''

def custom_kernel(data):
    global _side
    a, b = data
    _side = _side or torch.cuda.Stream()
    _side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_side):
        out = work(a, b)
    return out
'''

ALL_REDUCE = '''
import torch.distributed as dist


def custom_kernel(data):
    tensor, _, _ = data
    out = tensor.clone()
    dist.all_reduce(out)
    return out
'''


def _task(reference: str, tests: list[dict], benchmarks: list[dict], multi_gpu: bool = False) -> Task:
    files = {"submission.py": SUBMISSION_MARKER, "task.py": "", "reference.py": reference,
             **{name: (PROBLEMS_ROOT / "examples" / name).read_text(encoding="utf-8") for name in HARNESS_FILES}}
    return Task(lang="py", files=files, config=PyConfig(main="eval.py"), tests=tests, benchmarks=benchmarks,
                test_timeout=300, benchmark_timeout=300, ranked_timeout=300, ranking_by="last", multi_gpu=multi_gpu)


def vectoradd_task(size: int = 1 << 20) -> Task:
    return _task(VECTORADD_REFERENCE, [{"size": 1000, "seed": 4242}, {"size": size, "seed": 5236}],
                 [{"size": size, "seed": 6252}])


def all_reduce_task() -> Task:
    return _task(ALL_REDUCE_REFERENCE, [{"size": 4096, "seed": 5, "world_size": 2}],
                 [{"size": 1 << 20, "seed": 9, "world_size": 2}], multi_gpu=True)
