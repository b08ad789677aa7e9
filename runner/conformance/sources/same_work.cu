// Control for side_stream.cu: the same work on the default stream (its honest time).
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
    slow_add<<<(data.n + 255) / 256, 256, 0>>>(data.a, data.b, data.out, data.n, 64);
    return data.out;
}
