#include <cuda_runtime.h>

#include "task.cuh"

// data.a, data.b: n floats on the device. Write a[i] + b[i] into data.out (n floats, preallocated) on the default
// stream and return data.out.
output_t custom_kernel(input_t data) {
    return data.out;
}
