// A correct example submission: one thread per element, on the default stream.
#include <cuda_runtime.h>

#include "task.cuh"

__global__ void add_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

output_t custom_kernel(input_t data) {
    const int threads = 256;
    add_kernel<<<(data.n + threads - 1) / threads, threads>>>(data.a, data.b, data.out, data.n);
    return data.out;
}
