// Wrong: adds in place into the first input and returns it; the harness requires the sum in data.out.
#include <cuda_runtime.h>

#include "task.cuh"

__global__ void add_in_place(float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += b[i];
}

output_t custom_kernel(input_t data) {
    float* a = const_cast<float*>(data.a);
    add_in_place<<<(data.n + 255) / 256, 256>>>(a, data.b, data.n);
    return a;
}
