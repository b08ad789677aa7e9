// Ground truth for the timing-noise check of `kernelbot conformance`: the time of one custom_kernel call measured
// without per-call host overhead. Built with the submission and the problem's reference.cuh, with
// --default-stream per-thread so that the submission's launches can be captured. Two CUDA graphs of K steps each
// are replayed: K x (L2 flush + custom_kernel) and K x (L2 flush); their difference over K is the kernel's cold-L2
// time, as the harness measures it. Prints `truth_ns <value>` (median over replays).
//
//   ./graph_truth.out <size> [calls=100] [replays=9]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#define KB_CUDA_CHECK(expr)                                                                                   \
    do {                                                                                                      \
        cudaError_t kb_status_ = (expr);                                                                      \
        if (kb_status_ != cudaSuccess) {                                                                      \
            std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorName(kb_status_), __FILE__, __LINE__); \
            std::exit(110);                                                                                   \
        }                                                                                                     \
    } while (0)

struct CaseArgs {
    std::map<std::string, long long> values;
    long long integer(const std::string& key) const {
        auto found = values.find(key);
        if (found == values.end()) throw std::invalid_argument("case has no '" + key + "'");
        return found->second;
    }
};

#include "reference.cuh"

output_t custom_kernel(input_t data);

namespace {

cudaGraphExec_t capture(int calls, bool with_kernel, TestData& data, void* flush, size_t flush_bytes) {
    cudaStream_t stream = cudaStreamPerThread;
    cudaGraph_t graph;
    KB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < calls; ++i) {
        KB_CUDA_CHECK(cudaMemsetAsync(flush, i & 0xff, flush_bytes, stream));
        if (with_kernel) custom_kernel(kernel_input(data));
    }
    KB_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    KB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    return exec;
}

double median_ms(cudaGraphExec_t exec, int replays) {
    cudaEvent_t start, end;
    KB_CUDA_CHECK(cudaEventCreate(&start));
    KB_CUDA_CHECK(cudaEventCreate(&end));
    KB_CUDA_CHECK(cudaGraphLaunch(exec, cudaStreamPerThread));  // warm-up
    KB_CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    std::vector<double> times;
    for (int r = 0; r < replays; ++r) {
        KB_CUDA_CHECK(cudaEventRecord(start, cudaStreamPerThread));
        KB_CUDA_CHECK(cudaGraphLaunch(exec, cudaStreamPerThread));
        KB_CUDA_CHECK(cudaEventRecord(end, cudaStreamPerThread));
        KB_CUDA_CHECK(cudaEventSynchronize(end));
        float ms = 0;
        KB_CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
        times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s <size> [calls] [replays]\n", argv[0]);
        return 2;
    }
    CaseArgs args;
    args.values["size"] = std::atoll(argv[1]);
    args.values["seed"] = 4242;
    const int calls = argc > 2 ? std::atoi(argv[2]) : 100, replays = argc > 3 ? std::atoi(argv[3]) : 9;
    TestData data = generate_input(args);
    int device = 0, l2_bytes = 0;
    KB_CUDA_CHECK(cudaGetDevice(&device));
    KB_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    size_t flush_bytes = std::max<size_t>(2 * static_cast<size_t>(l2_bytes), 64u << 20);  // as eval.cu
    void* flush = nullptr;
    KB_CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
    KB_CUDA_CHECK(cudaDeviceSynchronize());
    double with_kernel = median_ms(capture(calls, true, data, flush, flush_bytes), replays);
    double flush_only = median_ms(capture(calls, false, data, flush, flush_bytes), replays);
    std::string error = check_implementation(data, kernel_input(data).out);
    if (!error.empty()) {
        std::fprintf(stderr, "the captured kernel is wrong: %s\n", error.c_str());
        return 1;
    }
    std::printf("truth_ns %.3f\n", (with_kernel - flush_only) * 1e6 / calls);
    return 0;
}
