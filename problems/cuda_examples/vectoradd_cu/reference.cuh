// vectoradd_cu reference: generation, reference result and check, all on the device (see ../eval.cu for the
// contract). Included by eval.cu only, after its KB_CUDA_CHECK and CaseArgs.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "task.cuh"

// A device buffer owned by the harness: allocated on construction, freed on destruction, movable only.
template <typename T>
class DeviceArray {
public:
    explicit DeviceArray(size_t count) : count_(count) {
        KB_CUDA_CHECK(cudaMalloc(&ptr_, sizeof(T) * (count ? count : 1)));
    }
    DeviceArray(DeviceArray&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)), count_(other.count_) {}
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
    DeviceArray& operator=(DeviceArray&&) = delete;
    ~DeviceArray() {
        if (ptr_) cudaFree(ptr_);
    }
    T* get() const { return ptr_; }
    size_t size() const { return count_; }

private:
    T* ptr_ = nullptr;
    size_t count_ = 0;
};

struct TestData {
    int n;
    DeviceArray<float> a, b;          // pristine input, never handed to the submission
    DeviceArray<float> given_a, given_b, out;  // the submission's copies and its output buffer
};

// A counter-based generator (splitmix64 of seed and index, Box-Muller): the same numbers for the same seed
// whatever the launch configuration.
__device__ inline uint64_t kb_splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

__global__ void kb_fill_normal(float* a, float* b, int n, uint64_t seed) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint64_t bits = kb_splitmix64(seed * 0x100000001b3ull + static_cast<uint64_t>(i));
        float u1 = (static_cast<float>(bits >> 40) + 1.0f) / 16777217.0f;  // (0, 1]
        float u2 = static_cast<float>((bits >> 16) & 0xffffff) / 16777216.0f;
        float radius = sqrtf(-2.0f * logf(u1));
        a[i] = radius * cospif(2.0f * u2);
        b[i] = radius * sinpif(2.0f * u2);
    }
}

struct KbMismatch {
    unsigned long long count;
    int first;
};

__global__ void kb_compare(const float* a, const float* b, const float* out, int n, KbMismatch* result) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float expected = a[i] + b[i];
        float got = out[i];
        if (!(fabsf(got - expected) <= 1e-6f + 1e-5f * fabsf(expected))) {  // NaN fails too
            atomicAdd(&result->count, 1ull);
            atomicMin(&result->first, i);
        }
    }
}

inline int kb_blocks(int n) {  // grid-stride kernels: at most 4096 blocks of 256 threads
    int blocks = (n + 255) / 256;
    return blocks < 1 ? 1 : (blocks > 4096 ? 4096 : blocks);
}

inline TestData generate_input(const CaseArgs& args) {
    long long size = args.integer("size");
    if (size < 1 || size > (1 << 28)) throw std::invalid_argument("size must be in [1, 2^28]");
    int n = static_cast<int>(size);
    TestData data{n, DeviceArray<float>(n), DeviceArray<float>(n), DeviceArray<float>(n), DeviceArray<float>(n),
                  DeviceArray<float>(n)};
    kb_fill_normal<<<kb_blocks(n), 256>>>(data.a.get(), data.b.get(), n, static_cast<uint64_t>(args.integer("seed")));
    KB_CUDA_CHECK(cudaGetLastError());
    KB_CUDA_CHECK(cudaMemcpy(data.given_a.get(), data.a.get(), sizeof(float) * n, cudaMemcpyDeviceToDevice));
    KB_CUDA_CHECK(cudaMemcpy(data.given_b.get(), data.b.get(), sizeof(float) * n, cudaMemcpyDeviceToDevice));
    KB_CUDA_CHECK(cudaMemset(data.out.get(), 0xff, sizeof(float) * n));  // NaN: an output never written fails
    return data;
}

inline input_t kernel_input(TestData& data) {
    return {data.given_a.get(), data.given_b.get(), data.out.get(), data.n};
}

// Checked against the pristine input, so overwriting the given copies gains nothing.
inline std::string check_implementation(const TestData& data, output_t output) {
    if (output != data.out.get()) {
        return output == data.given_a.get() || output == data.given_b.get()
                   ? "custom_kernel returned an input buffer; write the sum into data.out and return it"
                   : "custom_kernel must write the sum into data.out and return data.out";
    }
    KbMismatch host{0, data.n};
    DeviceArray<KbMismatch> device(1);
    KB_CUDA_CHECK(cudaMemcpy(device.get(), &host, sizeof host, cudaMemcpyHostToDevice));
    kb_compare<<<kb_blocks(data.n), 256>>>(data.a.get(), data.b.get(), data.out.get(), data.n, device.get());
    KB_CUDA_CHECK(cudaGetLastError());
    KB_CUDA_CHECK(cudaMemcpy(&host, device.get(), sizeof host, cudaMemcpyDeviceToHost));
    if (host.count == 0) return "";
    float got = 0, a = 0, b = 0;
    KB_CUDA_CHECK(cudaMemcpy(&got, data.out.get() + host.first, sizeof got, cudaMemcpyDeviceToHost));
    KB_CUDA_CHECK(cudaMemcpy(&a, data.a.get() + host.first, sizeof a, cudaMemcpyDeviceToHost));
    KB_CUDA_CHECK(cudaMemcpy(&b, data.b.get() + host.first, sizeof b, cudaMemcpyDeviceToHost));
    return std::to_string(host.count) + " mismatched elements; first at " + std::to_string(host.first) + ": got " +
           std::to_string(got) + ", expected " + std::to_string(a + b);
}

// The worker's side of a checked call: the bytes of the output, which must be data.out.
inline std::string output_bytes(const TestData& data, output_t output, std::vector<unsigned char>& bytes) {
    if (output != data.out.get()) {
        return output == data.given_a.get() || output == data.given_b.get()
                   ? "custom_kernel returned an input buffer; write the sum into data.out and return it"
                   : "custom_kernel must write the sum into data.out and return data.out";
    }
    bytes.resize(sizeof(float) * data.n);
    KB_CUDA_CHECK(cudaMemcpy(bytes.data(), data.out.get(), bytes.size(), cudaMemcpyDeviceToHost));
    return "";
}

// The supervisor's side: the worker's output bytes, checked against the supervisor's own pristine input.
inline std::string check_output_bytes(TestData& data, const std::vector<unsigned char>& bytes) {
    if (bytes.size() != sizeof(float) * static_cast<size_t>(data.n)) {
        return "the output has " + std::to_string(bytes.size()) + " bytes, expected " +
               std::to_string(sizeof(float) * static_cast<size_t>(data.n));
    }
    KB_CUDA_CHECK(cudaMemcpy(data.out.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    return check_implementation(data, data.out.get());
}
