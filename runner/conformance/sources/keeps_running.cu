// Exploit: a kernel that keeps running after custom_kernel returns. A host thread launches the real work a moment
// after the call has returned, so the timed window sees nothing. Defence: the output is copied and checked right
// after the sample (it is not there yet), and the supervisor's own clock sees work the events did not.
#include <cuda_runtime.h>

#include <chrono>
#include <thread>

#include "task.cuh"

__global__ void late_add(const float* a, const float* b, float* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = a[i] + b[i];
}

output_t custom_kernel(input_t data) {
    std::thread([data] {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        late_add<<<(data.n + 255) / 256, 256>>>(data.a, data.b, data.out, data.n);
        cudaDeviceSynchronize();
    }).detach();
    return data.out;
}
