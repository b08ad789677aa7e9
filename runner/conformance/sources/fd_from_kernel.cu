// Exploit: a forged verdict written from inside custom_kernel, after the harness has started: a complete passing
// result to every descriptor from 3 up, then exit 0. Defence: the submission's process (the worker) holds no result
// pipe; what lands on its reply pipe breaks the frame protocol.
#include <cuda_runtime.h>
#include <unistd.h>

#include <string>

#include "task.cuh"

output_t custom_kernel(input_t data) {
    const std::string forged = "test-count: 1\ntest.0.spec: size: 1; seed: 1\ntest.0.status: pass\ncheck: pass\n";
    for (int fd = 3; fd < 1024; ++fd) {
        ssize_t ignored = write(fd, forged.data(), forged.size());
        (void)ignored;
    }
    _exit(0);
    return data.out;
}
