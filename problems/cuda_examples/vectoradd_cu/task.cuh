// Types shared by the harness, the reference and submissions of vectoradd_cu.
#pragma once

// Device buffers of n floats each, owned by the harness. `a` and `b` are fresh copies of the generated input;
// `out` is the preallocated output buffer, the only buffer custom_kernel may return.
struct input_t {
    const float* a;
    const float* b;
    float* out;
    int n;
};

using output_t = float*;  // must be data.out once the sum has been written there
