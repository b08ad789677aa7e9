// Wrong: does not compile (a missing semicolon), so the run ends with a failed compilation.
#include <cuda_runtime.h>

#include "task.cuh"

__global__ void add_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i]
}

output_t custom_kernel(input_t data) {
    add_kernel<<<(data.n + 255) / 256, 256>>>(data.a, data.b, data.out, data.n);
    return data.out;
}
