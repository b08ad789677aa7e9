// Exploit: do the work on a side stream and return at once, so that events recorded on the default stream see
// (almost) nothing. Defence: every sample is closed by a device-wide synchronize, so the side stream's work is
// inside the timed window (the time stays that of the work), and the host-vs-event cross-check flags the rest.
#include <cuda_runtime.h>

#include "task.cuh"

__global__ void slow_add(const float* a, const float* b, float* out, int n, int rounds) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float value = a[i] + b[i];
        for (int r = 0; r < rounds; ++r) value = value * 1.0000001f - value * 0.0000001f;
        out[i] = a[i] + b[i] + (value - value);
    }
}

output_t custom_kernel(input_t data) {
    static cudaStream_t side = nullptr;
    if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    slow_add<<<(data.n + 255) / 256, 256, 0, side>>>(data.a, data.b, data.out, data.n, 64);
    return data.out;
}
