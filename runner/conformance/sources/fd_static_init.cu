// Exploit: a forged verdict on the result fd from C++. A static initializer of the submission runs before the
// harness's main; it reads the case file named on the command line, writes a complete, consistent passing result
// (every case passed, one nanosecond per benchmark) to every descriptor from 3 up, which includes the result pipe
// when the harness shares the submission's process, and exits 0 before the harness can write anything.
// Defence (issue #16 item 5): the runner starts supervisor.out, a binary without user code, which owns the result
// pipe; the submission's binary runs as a worker with only its request/reply pipes, so the forgery lands on the
// reply pipe and breaks the frame protocol.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "task.cuh"

namespace {

std::vector<std::string> command_line() {
    std::ifstream file("/proc/self/cmdline", std::ios::binary);
    std::vector<std::string> args;
    for (std::string arg; std::getline(file, arg, '\0');) args.push_back(arg);
    return args;
}

std::string forged_result(const std::vector<std::string>& args) {
    std::string stage = args.size() > 1 ? args[1] : "test";
    std::vector<std::string> cases;
    if (args.size() > 2) {
        std::ifstream file(args[2]);
        for (std::string line; std::getline(file, line);) {
            if (!line.empty()) cases.push_back(line);
        }
    }
    if (cases.empty()) cases.push_back("size: 1; seed: 1");
    std::ostringstream out;
    out << "harness-version: kernelbot-examples-cuda 0.2.0\n";
    const char* prefix = stage == "test" ? "test" : "benchmark";
    out << prefix << "-count: " << cases.size() << "\n";
    for (size_t i = 0; i < cases.size(); ++i) {
        out << prefix << "." << i << ".spec: " << cases[i] << "\n";
        if (stage != "test") {
            out << "benchmark." << i << ".runs: 100\n";
            for (const char* key : {"mean", "std", "err", "best", "worst"}) {
                out << "benchmark." << i << "." << key << ": " << (key[0] == 's' || key[0] == 'e' ? "0" : "1") << "\n";
            }
        }
        out << prefix << "." << i << ".status: pass\n";
    }
    out << "check: pass\n";
    return out.str();
}

struct Forger {
    Forger() {
        std::string forged = forged_result(command_line());
        for (int fd = 3; fd < 1024; ++fd) {
            ssize_t ignored = write(fd, forged.data(), forged.size());
            (void)ignored;
        }
        _exit(0);
    }
} forger;

}  // namespace

__global__ void add_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

output_t custom_kernel(input_t data) {
    add_kernel<<<(data.n + 255) / 256, 256>>>(data.a, data.b, data.out, data.n);
    return data.out;
}
