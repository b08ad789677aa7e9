"""The source pre-check's rules (docs/operations.md): each fires on an attack and stays quiet on real, legitimate
kernels (Triton, inline CUDA through load_inline, plain torch, a CUDA file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from problems import PROBLEMS_ROOT
from services.core.admission import policy, precheck
from services.core.admission.precheck import RULES, findings_of

EXPLOITS = Path(__file__).resolve().parents[1] / "exploits" / "submissions"

TRITON = '''
"""Vector add in Triton: one program per block, masked at the tail; timed by the harness, never by us."""
import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def custom_kernel(data: input_t) -> output_t:
    x, y = data
    out = torch.empty_like(x)
    n = out.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
    add_kernel[grid](x, y, out, n, BLOCK=1024)
    return out


if __name__ == "__main__":
    # quick local timing while developing (the harness times for real)
    import time
    a = torch.randn(1 << 20, device="cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    custom_kernel((a, a))
    torch.cuda.synchronize()
    print(time.perf_counter() - start)
'''

LOAD_INLINE = r'''
import torch
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void add_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];  // one thread per element, no std::thread here
}

torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int n = a.numel();
    auto stream = at::cuda::getCurrentCUDAStream();
    add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                                    out.data_ptr<float>(), n);
    return out;
}
"""
cpp_source = "torch::Tensor add(torch::Tensor a, torch::Tensor b);"

module = load_inline(name="add_ext", cpp_sources=[cpp_source], cuda_sources=[cuda_source], functions=["add"],
                     verbose=True, extra_cuda_cflags=["-O3"])


def custom_kernel(data):
    a, b = data
    return module.add(a, b)
'''

PLAIN_TORCH = '''
import math

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.benchmark = True


class Softmax:
    """Row softmax; the timer and the checker are the harness's business."""

    def __init__(self):
        self.time = 0  # an attribute of our own that happens to be called time
        self.stream = None

    def __call__(self, x):
        shifted = x - x.max(dim=-1, keepdim=True).values
        return F.softmax(shifted, dim=-1)


softmax = Softmax()


def custom_kernel(data):
    out = softmax(data)
    with open("debug.txt", "w") as log:  # a file of our own, by name
        log.write(str(math.prod(out.shape)))
    start = torch.cuda.Event(enable_timing=True)  # our own events, never the harness's
    start.record()
    return out
'''

CUDA_FILE = r'''
#include <array>
#include <cuda_runtime.h>
#include "task.h"
#include "utils.h"

// Timing is the harness's job: we never call cudaEventElapsedTime ourselves, nor std::thread.
__global__ void grayscale_kernel(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 0.2989f * in[3 * i] + 0.587f * in[3 * i + 1] + 0.114f * in[3 * i + 2];
}

output_t custom_kernel(input_t data) {
    output_t out(data.size() / 3);
    write_output(out);
    cudaDeviceSynchronize();
    return out;
}
'''

LEGITIMATE = {"triton.py": TRITON, "inline_cuda.py": LOAD_INLINE, "plain_torch.py": PLAIN_TORCH,
              "kernel.cu": CUDA_FILE}


def rules_of(code: str, file_name: str = "submission.py") -> set[str]:
    return {finding.rule for finding in findings_of(code, file_name)}


@pytest.mark.parametrize("file_name", sorted(LEGITIMATE))
def test_legitimate_kernels_fire_nothing(file_name: str) -> None:
    assert findings_of(LEGITIMATE[file_name], file_name) == []


BUNDLED = sorted([*PROBLEMS_ROOT.glob("*/*/solutions/*/*.py"), *PROBLEMS_ROOT.glob("*/*/solutions/*/*.cu"),
                  *PROBLEMS_ROOT.glob("*/*/submission.*")])


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_bundled_solutions_fire_nothing(path: Path) -> None:
    assert findings_of(path.read_text(), path.name) == []


# Each rule: attacks that fire it, and near misses (the same API used legitimately) that must not.
FIRING = {
    "timer-patch": [
        "import torch\ntorch.cuda.Event = object\n",
        "import torch\ntorch.cuda.Event.elapsed_time = lambda self, end: 0.001\n",
        "import torch.cuda as tc\ntc.synchronize = lambda: None\n",
        "from torch.cuda import Event\nEvent.record = lambda *a: None\n",
        "import time\ntime.perf_counter_ns = lambda: 0\n",
        "import torch\nsetattr(torch.cuda, 'synchronize', lambda: None)\n",
        "import torch\ncuda = torch.cuda\ncuda.Event = None\n",
        "import torch\nsetattr(torch.cuda, 'Ev' + 'ent', None)\n",
        "import time\nname = 'perf_counter'\nsetattr(time, name, lambda: 0)\n",
        "import torch\ntorch.cuda.__dict__['Event'] = None\n",
        "import torch\nvars(torch.cuda)['synchronize'] = lambda: None\n",
        "import torch\ntorch.cuda = None\n",
        'src = """\ncudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) { *ms = 0; return '
        'cudaSuccess; }\n"""\n',
    ],
    "harness-reach": [
        "import sys\nsys.modules['utils'].verbose_allclose = lambda *a: []\n",
        "import __main__\n",
        "def f():\n    pass\nf.__globals__['check'] = None\n",
        "import gc\nfor o in gc.get_objects():\n    pass\n",
        "import inspect\nframe = inspect.currentframe().f_back\n",
        "import sys\nframe = sys._getframe(1)\n",
        "import utils\nutils.match_reference = lambda *a: (True, '')\n",
        "import importlib\nm = importlib.import_module('__main__')\n",
    ],
    "fd-write": [
        "import os\nos.write(3, b'check: pass\\n')\n",
        "import os\nopen(int(os.environ['POPCORN_FD']), 'w').write('check: pass')\n",
        "with open(3, 'w') as f:\n    f.write('x')\n",
        "from os import fdopen\nfdopen(3, 'w')\n",
        "import sys, io\nsys.stdout = io.StringIO()\n",
        "src = '''\n#include <unistd.h>\nvoid forge() { write(3, \"check: pass\\n\", 12); }\n'''\n",
    ],
    "ctypes": [
        "import ctypes\nlib = ctypes.CDLL('libcudart.so')\n",
        "from ctypes import CDLL\n",
        "import importlib\nimportlib.import_module('ctypes')\n",
        "src = '''\n#include <dlfcn.h>\nvoid* h = dlopen(\"libcuda.so\", RTLD_NOW);\n'''\n",
    ],
    "proc-access": [
        "open('/proc/self/maps').read()\n",
        "import os\nos.listdir('/proc/self/fd')\n",
        "src = '''\nFILE* f = fopen(\"/proc/self/mem\", \"r\");\n'''\n",
    ],
    "side-stream": [
        "import torch\ns = torch.cuda.Stream()\n",
        "import torch\nwith torch.cuda.stream(torch.cuda.Stream()):\n    pass\n",
        "import torch\ng = torch.cuda.CUDAGraph()\n",
        "src = '''\ncudaStream_t s;\ncudaStreamCreate(&s);\n'''\n",
    ],
    "thread": [
        "import threading\nthreading.Thread(target=print).start()\n",
        "from concurrent.futures import ThreadPoolExecutor\n",
        "import multiprocessing as mp\nmp.Process(target=print).start()\n",
        "import os\nos.fork()\n",
        "src = '''\n#include <thread>\nstd::thread t([]{});\n'''\n",
    ],
    "dynamic-code": [
        "exec('import os')\n",
        "eval(compile('1', 'x', 'eval'))\n",
        "m = __import__('o' + 's')\n",
    ],
}
QUIET = {
    "timer-patch": [
        "import torch\nstart = torch.cuda.Event(enable_timing=True)\nstart.record()\ntorch.cuda.synchronize()\n",
        "import time\nt0 = time.perf_counter()\n",
        "import time\n\n\nclass Clock:\n    def __init__(self):\n        self.time = time.time()\n",
        "# torch.cuda.Event = FakeEvent would be cheating\n",
        "class Box:\n    pass\n\n\nbox = Box()\nsetattr(box, 'time', 1)\nvars(box)['Event'] = 2\n",
        'src = """\ncudaEventRecord(start);\ncudaEventElapsedTime(&ms, start, stop);\n"""\n',
    ],
    "harness-reach": [
        'if __name__ == "__main__":\n    print("hi")\n',
        "import gc\ngc.collect()\n",
        "import sys\nsys.setrecursionlimit(10000)\nprint(sys.version)\n",
        "from utils import make_match_reference\n",
        "def f():\n    '''uses no __globals__ or sys.modules'''\n",
    ],
    "fd-write": [
        "with open('out.txt', 'w') as f:\n    f.write('x')\n",
        "import sys\nprint('progress', file=sys.stderr)\nsys.stdout.flush()\n",
        "import os\npath = os.path.join('a', 'b')\n",
    ],
    "ctypes": [
        "import torch\nx = torch.ones(3).to(torch.float16)  # no ctypes here\n",
        "name = 'ctypes are fun to read about'\n",
    ],
    "proc-access": [
        "import os\nos.makedirs('procedures', exist_ok=True)\n",
        "# reading /proc/self/maps would be an attack\n",
    ],
    "side-stream": [
        "import torch\ns = torch.cuda.current_stream()\ns.synchronize()\n",
        "src = '''\nauto stream = at::cuda::getCurrentCUDAStream();\nk<<<1, 1, 0, stream>>>();\n'''\n",
    ],
    "thread": [
        "import threading\nlock = threading.Lock()\n",
        "import torch\ntorch.set_num_threads(4)\n",
    ],
    "dynamic-code": [
        "import torch\nfast = torch.compile(lambda x: x * 2)\n",
        "import re\npattern = re.compile('a+')\n",
        "import torch\nm = torch.nn.Linear(2, 2)\nm.eval()\n",
    ],
}


def test_every_rule_has_firing_and_quiet_examples() -> None:
    assert set(FIRING) == set(QUIET) == set(RULES)


@pytest.mark.parametrize(("rule", "code"), [(r, c) for r, codes in FIRING.items() for c in codes])
def test_rule_fires(rule: str, code: str) -> None:
    assert rule in rules_of(code), f"{rule} did not fire on:\n{code}"


@pytest.mark.parametrize(("rule", "code"), [(r, c) for r, codes in QUIET.items() for c in codes])
def test_rule_stays_quiet(rule: str, code: str) -> None:
    assert rule not in rules_of(code), f"{rule} fired on:\n{code}"


def test_every_rule_has_a_name_a_severity_and_a_one_line_message() -> None:
    for name, rule in RULES.items():
        assert rule.name == name and rule.severity in ("high", "medium", "low")
        assert rule.message and "\n" not in rule.message
        assert rule.default in precheck.OUTCOMES


@pytest.mark.parametrize(("file", "rule"), [
    ("cuda_event_patch.py", "timer-patch"), ("timer_patch.py", "timer-patch"),
    ("checker_monkeypatch.py", "harness-reach"), ("worker_monkeypatch.py", "harness-reach"),
    ("seed_from_memory.py", "harness-reach"), ("side_thread.py", "thread"),
    ("fd_complete_forgery.py", "fd-write"),
])
def test_the_exploit_suite_fires_its_rule(file: str, rule: str) -> None:
    path = EXPLOITS / file
    assert rule in rules_of(path.read_text(), path.name)


def test_a_finding_names_its_line() -> None:
    [finding] = findings_of("import torch\n\n\ntorch.cuda.synchronize = lambda: None\n", "a.py")
    assert (finding.rule, finding.line, finding.severity) == ("timer-patch", 4, "high")


def test_the_verdict_takes_the_worst_outcome_and_names_every_rule() -> None:
    code = "import torch, threading\ntorch.cuda.Event = None\nthreading.Thread(target=print)\nexec('1')\n"
    verdict = precheck.precheck(code, "a.py", "leaderboard")
    assert verdict.outcome == "refuse"  # thread refuses by default, worse than hacked
    assert verdict.detail == ("Submission rejected by KernelGuard pre-check (line 3: starts threads or processes). "
                              "Matched rules: dynamic-code, thread, timer-patch.")
    hacked = precheck.precheck(code, "a.py", "leaderboard", {"thread": "off"})
    assert hacked.outcome == "hacked" and hacked.detail.startswith(
        "Submission rejected by KernelGuard pre-check (line 2: reassigns a timing or synchronisation API)")
    warned = precheck.precheck(code, "a.py", "leaderboard", {"thread": "warn", "timer-patch": "warn"})
    assert warned.outcome == "warn"
    assert precheck.precheck(code, "a.py", "leaderboard",
                             {rule: "off" for rule in ("thread", "timer-patch", "dynamic-code")}) is None


def test_test_mode_is_not_prechecked_and_multi_gpu_tasks_may_start_processes() -> None:
    code = "import multiprocessing\nmultiprocessing.Process(target=print).start()\n"
    assert precheck.precheck(code, "a.py", "test") is None
    assert precheck.precheck(code, "a.py", "leaderboard").outcome == "refuse"
    assert precheck.precheck(code, "a.py", "leaderboard", multi_gpu=True) is None
    assert precheck.precheck(code, "a.py", "leaderboard", {"thread": "hacked"}, multi_gpu=True).outcome == "hacked"


def test_overrides_are_validated() -> None:
    assert precheck.validate_overrides({"thread": "off"}) == {"thread": "off"}
    with pytest.raises(ValueError, match="unknown pre-check rule 'threads'"):
        precheck.validate_overrides({"threads": "off"})
    with pytest.raises(ValueError, match="unknown outcome 'ban'"):
        precheck.validate_overrides({"thread": "ban"})


def test_unparsable_python_is_left_to_the_harness() -> None:
    assert findings_of("def broken(:\n    torch.cuda.Event = None\n", "a.py") == []


def test_the_policy_fails_closed(monkeypatch) -> None:

    deep = "x = 1" + " + 1" * 200_000
    with pytest.raises(policy.Refused) as refused:
        policy.source_precheck(deep, "a.py", "leaderboard")
    assert (refused.value.refusal.status, refused.value.refusal.detail) == (400, precheck.UNREADABLE)

    def broken(*args, **kwargs):
        raise KeyError("a rule's bug")

    monkeypatch.setattr(precheck, "python_hits", broken)
    with pytest.raises(policy.Refused) as unavailable:
        policy.source_precheck("print(1)\n", "a.py", "leaderboard")
    assert (unavailable.value.refusal.status, unavailable.value.refusal.detail) == (503, precheck.UNAVAILABLE)
    assert policy.source_precheck("print(1)\n", "a.py", "test") is None  # test mode is not read at all


def test_the_policy_turns_a_verdict_into_the_event_model_and_a_refusal() -> None:

    verdict = policy.source_precheck("import os\nos.write(3, b'x')\n", "a.py", "benchmark")
    assert verdict.outcome == "hacked" and verdict.rules == ["fd-write"] and verdict.findings[0].line == 2
    assert policy.precheck_refusal(verdict) is None
    refusing = policy.source_precheck("import os\nos.write(3, b'x')\n", "a.py", "benchmark", {"fd-write": "refuse"})
    assert policy.precheck_refusal(refusing) == policy.Refusal(400, refusing.detail)
