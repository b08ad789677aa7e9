// KernelBot example harness for CUDA problems. Built twice by the runner (runner/stages/cuda_supervisor.py):
//
//   supervisor.out  this file alone, with -DKERNELBOT_SUPERVISOR: `./supervisor.out <stage> <casefile>`, the program
//                   the runner starts. It never contains user code.
//   eval.out        the submission plus this file: the worker, `./eval.out worker <request fd> <reply fd>`, started
//                   by the supervisor. It is the only process that runs user code.
//
// The supervisor speaks the POPCORN_FD protocol of harness.md §4: `key: value` lines on the result pipe, one
// `check: pass|fail` at the end; exit 0 (all passed), 112 (a case failed), 111 (no usable POPCORN_FD), 113 (bad case
// file or seed), 110 (a CUDA API call of the supervisor failed), 2 (usage). Samples go to the optional
// POPCORN_DATA_FD as JSON lines.
//
// Why two processes (harness.md §5.3.1, §8.1 "writing to the result fd"): user code linked into the harness can
// write to any descriptor of its process, and it runs before main (static initializers, constructors of any
// priority, .preinit_array). So the result pipe, the data pipe and the secret seed live only in the supervisor,
// which is a different executable; the worker is exec'ed with descriptors 0-2 and its two request/reply pipes, and an
// environment without POPCORN_* or KERNELBOT_* variables. The worker returns the bytes of each output; the
// supervisor generates the same input itself (same mixed seed) and checks those bytes against its own pristine copy
// with the reference, so neither the verdict nor the check can be forged from the worker. Anything else the worker
// writes on its reply pipe breaks the frame protocol and fails the stage.
//
// The problem's reference.cuh provides (see vectoradd_cu/reference.cuh):
//   struct TestData;                                          one generated input, owned by the harness
//   TestData generate_input(const CaseArgs& args);            args["seed"] is already mixed; deterministic
//   input_t kernel_input(TestData& data);                     what custom_kernel receives (fresh copies)
//   std::string check_implementation(const TestData& data, output_t output);   "" when correct
//   std::string output_bytes(const TestData& data, output_t output, std::vector<unsigned char>& bytes);  worker side
//   std::string check_output_bytes(TestData& data, const std::vector<unsigned char>& bytes);  supervisor side
// and the submission `output_t custom_kernel(input_t data)`.
//
// Timing (harness.md §5.3): in the worker, a buffer of twice the queried L2 size is written and persisting lines
// are reset before each sample; per-call CUDA events on the default stream closed by a device-wide synchronize; the
// worker flags samples whose host interval exceeds the event interval by more than a calibrated allowance. The
// supervisor times every request from its side and rejects samples whose round trip, less the no-kernel round trip
// calibrated with pings, exceeds the reported time by more than max(200 us, 50%): a patched or lying timer in the
// worker shows there. More than 10% rejected samples fail the case. Seeds are mixed with HMAC-SHA256 (the same
// function as eval.py), with disjoint streams for tests, benchmark, leaderboard and warm-up.

#include <cuda_runtime.h>
#include <fcntl.h>
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

[[maybe_unused]] constexpr int kExitFailed = 112, kExitNoFd = 111, kExitBadInput = 113, kExitCuda = 110, kExitUsage = 2;

// Harness CUDA calls: any failure ends the process with 110 (reference.cuh uses this macro too).
#define KB_CUDA_CHECK(expr)                                                                                      \
    do {                                                                                                         \
        cudaError_t kb_status_ = (expr);                                                                         \
        if (kb_status_ != cudaSuccess) {                                                                         \
            std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(kb_status_), __FILE__, __LINE__, \
                         cudaGetErrorString(kb_status_));                                                        \
            std::exit(kExitCuda);                                                                                \
        }                                                                                                        \
    } while (0)

// One case line: `key: value` pairs; integer values only in this harness.
struct CaseArgs {
    std::map<std::string, long long> values;
    long long integer(const std::string& key) const {
        auto found = values.find(key);
        if (found == values.end()) throw std::invalid_argument("case has no '" + key + "'");
        return found->second;
    }
};

#include "reference.cuh"

#ifndef KERNELBOT_SUPERVISOR
output_t custom_kernel(input_t data);
#endif

namespace {

[[maybe_unused]] const char* const kVersion = "kernelbot-examples-cuda 0.2.1";
[[maybe_unused]] const char* const kTimer = "cuda-event";
[[maybe_unused]] const char* const kSeedFdVariable = "KERNELBOT_HARNESS_SEED_FD";
[[maybe_unused]] const char* const kWorkerBinary = "./eval.out";
// As eval.py: disjoint input streams for the benchmark stage and the warm-up.
[[maybe_unused]] constexpr unsigned long long kBenchmarkIterationBase = 1ull << 20, kWarmUpIterationBase = 1ull << 24;
[[maybe_unused]] constexpr int kMinSamples = 10, kWarmUpCalls = 3, kPings = 11;
[[maybe_unused]] constexpr double kWarmUpSeconds = 0.1, kWallLimitSeconds = 120.0;
[[maybe_unused]] constexpr double kCrossCheckAbsNs = 200e3, kCrossCheckRel = 0.5;
[[maybe_unused]] constexpr size_t kMaxHead = 1 << 16, kMaxBody = size_t(1) << 32;

// ---- frames between supervisor and worker: magic, head length, body length, head text, body bytes ----

constexpr uint32_t kFrameMagic = 0x4b424631;  // "KBF1"

bool write_all(int fd, const void* data, size_t size) {
    const char* at = static_cast<const char*>(data);
    while (size > 0) {
        ssize_t done = write(fd, at, size);
        if (done < 0 && errno == EINTR) continue;
        if (done <= 0) return false;
        at += done, size -= static_cast<size_t>(done);
    }
    return true;
}

bool read_all(int fd, void* data, size_t size) {
    char* at = static_cast<char*>(data);
    while (size > 0) {
        ssize_t done = read(fd, at, size);
        if (done < 0 && errno == EINTR) continue;
        if (done <= 0) return false;
        at += done, size -= static_cast<size_t>(done);
    }
    return true;
}

bool send_frame(int fd, const std::string& head, const std::vector<unsigned char>& body = {}) {
    uint32_t prefix[2] = {kFrameMagic, static_cast<uint32_t>(head.size())};
    uint64_t body_size = body.size();
    return write_all(fd, prefix, sizeof prefix) && write_all(fd, &body_size, sizeof body_size) &&
           write_all(fd, head.data(), head.size()) && (body.empty() || write_all(fd, body.data(), body.size()));
}

// "" on success; otherwise why the frame could not be read ("exited" when the other side closed its end).
std::string receive_frame(int fd, std::string& head, std::vector<unsigned char>& body, size_t max_body) {
    uint32_t prefix[2];
    uint64_t body_size = 0;
    if (!read_all(fd, prefix, sizeof prefix)) return "exited";
    if (prefix[0] != kFrameMagic) return "protocol violation: bad frame header";
    if (!read_all(fd, &body_size, sizeof body_size)) return "exited";
    if (prefix[1] > kMaxHead || body_size > max_body) return "protocol violation: frame too large";
    head.assign(prefix[1], '\0');
    body.resize(body_size);
    if (!read_all(fd, head.data(), head.size()) || (body_size && !read_all(fd, body.data(), body.size()))) {
        return "exited";
    }
    return "";
}

// ---- seed mixing: HMAC-SHA256(secret as decimal text, "<seed>:<iteration>"), first 31 bits (as eval.py) ----

struct Sha256 {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    unsigned char block[64];
    size_t used = 0;
    uint64_t bits = 0;

    static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
    void compress() {
        static const uint32_t k[64] = {
            0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
            0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
            0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
            0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
            0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
            0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
            0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
            0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
        uint32_t w[64];
        for (int i = 0; i < 16; ++i) {
            w[i] = uint32_t(block[4 * i]) << 24 | uint32_t(block[4 * i + 1]) << 16 | uint32_t(block[4 * i + 2]) << 8 |
                   uint32_t(block[4 * i + 3]);
        }
        for (int i = 16; i < 64; ++i) {
            uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int i = 0; i < 64; ++i) {
            uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
            uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
        }
        uint32_t add[8] = {a, b, c, d, e, f, g, hh};
        for (int i = 0; i < 8; ++i) h[i] += add[i];
    }
    void update(const unsigned char* data, size_t size) {
        for (size_t i = 0; i < size; ++i) {
            block[used++] = data[i];
            bits += 8;
            if (used == 64) compress(), used = 0;
        }
    }
    void digest(unsigned char out[32]) {
        uint64_t total = bits;
        unsigned char pad = 0x80, zero = 0;
        update(&pad, 1);
        while (used != 56) update(&zero, 1);
        for (int i = 7; i >= 0; --i) block[used++] = static_cast<unsigned char>(total >> (8 * i));
        compress();
        for (int i = 0; i < 32; ++i) out[i] = static_cast<unsigned char>(h[i / 4] >> (24 - 8 * (i % 4)));
    }
};

void hmac_sha256(const std::string& key, const std::string& message, unsigned char out[32]) {
    unsigned char block[64] = {0}, inner[32];
    if (key.size() > 64) {
        Sha256 hashed;
        hashed.update(reinterpret_cast<const unsigned char*>(key.data()), key.size());
        hashed.digest(block);
    } else {
        std::memcpy(block, key.data(), key.size());
    }
    unsigned char ipad[64], opad[64];
    for (int i = 0; i < 64; ++i) ipad[i] = block[i] ^ 0x36, opad[i] = block[i] ^ 0x5c;
    Sha256 first, second;
    first.update(ipad, 64);
    first.update(reinterpret_cast<const unsigned char*>(message.data()), message.size());
    first.digest(inner);
    second.update(opad, 64);
    second.update(inner, 32);
    second.digest(out);
}

// Public runs step by 13 as upstream; with a secret the mixed seed reveals nothing about it.
[[maybe_unused]] long long mix_seed(const std::string* secret, long long seed, unsigned long long iteration) {
    if (!secret) return seed + 13 * static_cast<long long>(iteration);
    unsigned char digest[32];
    hmac_sha256(*secret, std::to_string(seed) + ":" + std::to_string(iteration), digest);
    uint32_t head = uint32_t(digest[0]) << 24 | uint32_t(digest[1]) << 16 | uint32_t(digest[2]) << 8 | digest[3];
    return static_cast<long long>(head & 0x7FFFFFFFu);
}

// ---- case lines and the result channel ----

std::string trim(const std::string& text) {
    size_t begin = text.find_first_not_of(" \t\r\n"), end = text.find_last_not_of(" \t\r\n");
    return begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
}

[[maybe_unused]] bool read_line(FILE* file, std::string& line) {
    line.clear();
    for (int c; (c = std::fgetc(file)) != EOF;) {
        if (c == '\n') return true;
        line += static_cast<char>(c);
    }
    return !line.empty();
}

CaseArgs parse_case_line(const std::string& line) {
    CaseArgs args;
    size_t start = 0;
    while (start <= line.size()) {
        size_t stop = line.find(';', start);
        std::string part = line.substr(start, stop == std::string::npos ? std::string::npos : stop - start);
        size_t colon = part.find(':');
        std::string key = trim(part.substr(0, colon));
        std::string value = colon == std::string::npos ? "" : trim(part.substr(colon + 1));
        bool key_ok = !key.empty() && (std::isalpha(static_cast<unsigned char>(key[0])) || key[0] == '_');
        for (char c : key) key_ok = key_ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
        char* end = nullptr;
        errno = 0;
        long long number = value.empty() ? 0 : std::strtoll(value.c_str(), &end, 10);
        if (!key_ok || value.empty() || *end != '\0' || errno == ERANGE) {
            throw std::invalid_argument("bad case line '" + line + "'");
        }
        args.values[key] = number;
        if (stop == std::string::npos) break;
        start = stop + 1;
    }
    return args;
}


// A case as the line the worker parses back: `key: value; ...` (keys sorted, as CaseArgs keeps them).
[[maybe_unused]] std::string render_case(const CaseArgs& args) {
    std::string line;
    for (const auto& [key, value] : args.values) {
        line += (line.empty() ? "" : "; ") + key + ": " + std::to_string(value);
    }
    return line;
}

// ---- statistics (harness.md §5.4) ----

struct Stats {
    double mean = 0, std = 0, err = 0, best = 0, worst = 0, median = 0, ci_low = 0, ci_high = 0;
};

[[maybe_unused]] Stats summarize(std::vector<double> samples) {
    Stats s;
    size_t n = samples.size();
    std::sort(samples.begin(), samples.end());
    for (double x : samples) s.mean += x;
    s.mean /= n;
    double squares = 0;
    for (double x : samples) squares += (x - s.mean) * (x - s.mean);
    s.std = n > 1 ? std::sqrt(squares / (n - 1)) : 0.0;
    s.err = s.std / std::sqrt(double(n));
    s.best = samples.front(), s.worst = samples.back();
    s.median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
    size_t j = 1, k = n;
    if (n >= 6) {
        j = std::max<long>(1, static_cast<long>(std::floor(n / 2.0 - 0.98 * std::sqrt(double(n)))));
        k = std::min<long>(n, static_cast<long>(std::ceil(1 + n / 2.0 + 0.98 * std::sqrt(double(n)))));
    }
    s.ci_low = samples[j - 1], s.ci_high = samples[k - 1];
    return s;
}

double now_ns() {
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[maybe_unused]] __global__ void noop_kernel() {}

#ifdef KERNELBOT_EVAL_SELFTEST
// Host-only self test for machines without a GPU (built only with -DKERNELBOT_EVAL_SELFTEST): reads lines
// `mix <secret|-> <seed> <iteration>` or `case <case line>` from stdin and prints the result of each.
int selftest() {
    for (std::string line; read_line(stdin, line);) {
        char secret[64] = "";
        long long seed = 0;
        unsigned long long iteration = 0;
        if (std::sscanf(line.c_str(), "mix %63s %lld %llu", secret, &seed, &iteration) == 3) {
            std::string text = secret;
            std::printf("%lld\n", mix_seed(text == "-" ? nullptr : &text, seed, iteration));
            continue;
        }
        try {
            std::string joined;
            for (const auto& [key, value] : parse_case_line(trim(line.substr(line.find("case") + 4))).values) {
                joined += key + "=" + std::to_string(value) + " ";
            }
            std::printf("%s\n", trim(joined).c_str());
        } catch (const std::exception&) {
            std::printf("error\n");
        }
    }
    return 0;
}
#endif

#ifdef KERNELBOT_SUPERVISOR
// =====================================================================================================================
// The supervisor: owns the case file, the secret seed, the result and data pipes, the reference check and the
// statistics. Contains no user code.

// Filled by take_environment before main; plain data, so no later dynamic initialization can overwrite it.
int g_result_fd = -1, g_data_fd = -1;
bool g_has_secret = false;
char g_secret[64];

int take_fd(const char* name) {
    const char* text = std::getenv(name);
    int fd = -1;
    struct stat info;
    if (text && *text) {
        char* end = nullptr;
        long value = std::strtol(text, &end, 10);
        if (*end == '\0' && value >= 0 && value < 1 << 20 && fstat(static_cast<int>(value), &info) == 0) {
            fd = static_cast<int>(value);
        }
    }
    unsetenv(name);
    if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);  // never inherited by processes the submission starts
    return fd;
}

// glibc passes (argc, argv, envp) to constructors of the executable.
__attribute__((constructor(101))) void take_environment(int, char** argv, char**) {
    // Not dumpable, before the seed is read and before any worker exists: the worker runs user code under this
    // same uid, and a dumpable parent's /proc/<pid>/mem, fd and environ are open to it wherever Yama does not
    // restrict ptrace (seccomp cannot tell those paths apart from any other open). The re-exec below makes the
    // process dumpable again, and this constructor runs again in the new image. Fail closed: no seed is taken.
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        std::fprintf(stderr, "cannot make the supervisor non-dumpable: %s\n", std::strerror(errno));
        std::_Exit(kExitBadInput);
    }
    if (const char* raw = std::getenv("POPCORN_SEED")) {
        std::snprintf(g_secret, sizeof g_secret, "%s", raw);
        g_has_secret = true;
        unsetenv("POPCORN_SEED");
        int fds[2];
        if (pipe(fds) == 0) {  // unsetting leaves the seed in /proc/self/environ: re-exec with it in a pipe
            ssize_t written = write(fds[1], g_secret, std::strlen(g_secret));
            close(fds[1]);
            char number[16];
            std::snprintf(number, sizeof number, "%d", fds[0]);
            setenv(kSeedFdVariable, number, 1);
            if (written == static_cast<ssize_t>(std::strlen(g_secret))) execv("/proc/self/exe", argv);
            unsetenv(kSeedFdVariable);  // exec failed: keep the copy taken above
            close(fds[0]);
        }
    } else if (const char* fd_text = std::getenv(kSeedFdVariable)) {
        int fd = std::atoi(fd_text);
        ssize_t got = read(fd, g_secret, sizeof g_secret - 1);
        g_secret[got > 0 ? got : 0] = '\0';
        g_has_secret = got > 0;
        close(fd);
        unsetenv(kSeedFdVariable);
    }
    g_result_fd = take_fd("POPCORN_FD");
    g_data_fd = take_fd("POPCORN_DATA_FD");
}


struct Channel {
    FILE* file = nullptr;
    void write(const std::string& key, const std::string& value) {
        std::string text;
        for (char c : value) {
            if (c == '\n') text += "\\n";
            else if (c != '\r') text += c;
        }
        std::fprintf(file, "%s: %s\n", key.c_str(), text.c_str());
        std::fflush(file);
    }
    void write(const std::string& key, double value) {
        char buffer[64];
        std::snprintf(buffer, sizeof buffer, "%.3f", value);
        write(key, std::string(buffer));
    }
};


struct Case {
    std::string spec;
    CaseArgs args;
};

// The worker process: ./eval.out exec'ed with only stdio and its two pipes, and a scrubbed environment.
class WorkerProcess {
public:
    // "" when the worker started and said it is ready; otherwise why not.
    std::string start() {
        int requests[2], replies[2];
        if (pipe2(requests, O_CLOEXEC) != 0 || pipe2(replies, O_CLOEXEC) != 0) return "cannot create worker pipes";
        std::vector<std::string> kept;
        for (char** entry = environ; *entry; ++entry) {
            std::string text = *entry;
            if (text.rfind("POPCORN_", 0) != 0 && text.rfind("KERNELBOT_", 0) != 0) kept.push_back(text);
        }
        std::fflush(nullptr);
        pid_ = fork();
        if (pid_ < 0) return "cannot fork the worker";
        if (pid_ == 0) {
            // The child: descriptors 3 and 4 become the pipes; every other descriptor is closed (the result and data
            // pipes are close-on-exec already; this also covers anything inherited from the runner).
            int in = fcntl(requests[0], F_DUPFD_CLOEXEC, 16), out = fcntl(replies[1], F_DUPFD_CLOEXEC, 16);
            if (in < 0 || out < 0 || dup2(in, 3) < 0 || dup2(out, 4) < 0) _exit(127);
            for (int fd = 5; fd < 65536; ++fd) close(fd);
            std::vector<char*> env;
            for (auto& text : kept) env.push_back(text.data());
            env.push_back(nullptr);
            char* argv[] = {const_cast<char*>(kWorkerBinary), const_cast<char*>("worker"), const_cast<char*>("3"),
                            const_cast<char*>("4"), nullptr};
            execve(kWorkerBinary, argv, env.data());
            _exit(127);
        }
        close(requests[0]);
        close(replies[1]);
        requests_ = requests[1], replies_ = replies[0];
        std::string head;
        std::vector<unsigned char> body;
        std::string problem = receive_frame(replies_, head, body, 0);
        if (!problem.empty()) return describe(problem);
        if (head == "ready") return "";
        return head.rfind("failed ", 0) == 0 ? head.substr(7) : "worker protocol violation: expected ready";
    }

    // One request; "" with the reply head and body, or why the worker is gone.
    std::string exchange(const std::string& head, std::string& reply, std::vector<unsigned char>& body,
                         size_t max_body) {
        if (requests_ < 0) return "the worker is not running";
        if (!send_frame(requests_, head)) return describe("exited");
        std::string problem = receive_frame(replies_, reply, body, max_body);
        return problem.empty() ? "" : describe(problem);
    }

    void stop() {
        if (pid_ <= 0) return;
        if (requests_ >= 0) send_frame(requests_, "exit\n");
        close(requests_), close(replies_);
        requests_ = replies_ = -1;
        for (int waited = 0; waited < 200; ++waited) {  // two seconds to leave, then it is killed
            if (waitpid(pid_, nullptr, WNOHANG) == pid_) return void(pid_ = -1);
            usleep(10000);
        }
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

    ~WorkerProcess() { stop(); }

private:
    pid_t pid_ = -1;
    int requests_ = -1, replies_ = -1;

    std::string describe(const std::string& problem) {
        if (problem != "exited") return "worker " + problem;
        int status = 0;
        std::string how = "the worker exited";
        if (pid_ > 0 && waitpid(pid_, &status, 0) == pid_) {
            pid_ = -1;
            how += WIFSIGNALED(status) ? " (signal " + std::to_string(WTERMSIG(status)) + ")"
                                       : " (exit code " + std::to_string(WEXITSTATUS(status)) + ")";
        }
        return how;
    }
};

struct Reply {
    double event_ns = 0, host_ns = 0, wall_ns = 0;
    bool unsynchronized = false;
};

class Harness {
public:
    Harness(Channel& out, const std::string* secret) : out_(out), secret_(secret) {}

    // The worker is started before any CUDA call of the supervisor: a submission that cannot start (or that
    // writes on its pipe at load time) fails every case without the supervisor touching the GPU.
    void start_worker() { failure_ = worker_.start(); }
    void stop_worker() { worker_.stop(); }

    bool run_tests(const std::vector<Case>& cases) {
        out_.write("test-count", std::to_string(cases.size()));
        bool all_passed = true;
        for (size_t i = 0; i < cases.size(); ++i) {
            std::string prefix = "test." + std::to_string(i);
            out_.write(prefix + ".spec", cases[i].spec);
            Reply reply;
            std::string error = request("call", cases[i], 0, reply);
            out_.write(prefix + ".status", error.empty() ? "pass" : "fail");
            if (!error.empty()) out_.write(prefix + ".error", error);
            all_passed = all_passed && error.empty();
        }
        return all_passed;
    }

    bool run_benchmarks(const std::string& stage, const std::vector<Case>& cases) {
        out_.write("benchmark-count", std::to_string(cases.size()));
        if (!cases.empty()) warm_up(cases[0]);
        bool all_passed = true;
        for (size_t i = 0; i < cases.size(); ++i) {
            std::string prefix = "benchmark." + std::to_string(i);
            out_.write(prefix + ".spec", cases[i].spec);
            std::vector<double> samples;
            int discarded = 0;
            std::string error = measure(stage, cases[i], samples, discarded);
            if (!error.empty()) {
                out_.write(prefix + ".status", "fail");
                out_.write(prefix + ".error", error);
                all_passed = false;
                if (stage == "leaderboard") break;
                continue;
            }
            Stats s = summarize(samples);
            out_.write(prefix + ".runs", std::to_string(samples.size()));
            const std::pair<const char*, double> values[] = {
                {"mean", s.mean}, {"std", s.std}, {"err", s.err}, {"best", s.best}, {"worst", s.worst},
                {"median", s.median}, {"ci_low", s.ci_low}, {"ci_high", s.ci_high}};
            for (const auto& [name, value] : values) out_.write(prefix + "." + name, value);
            out_.write(prefix + ".timer", kTimer);
            out_.write(prefix + ".discarded", std::to_string(discarded));
            out_.write(prefix + ".status", "pass");
            send_samples(prefix, samples);
        }
        return all_passed;
    }

    bool run_profile(const std::vector<Case>& cases) {
        out_.write("benchmark-count", std::to_string(cases.size()));
        bool all_passed = true;
        for (size_t i = 0; i < cases.size(); ++i) {
            std::string prefix = "benchmark." + std::to_string(i);
            out_.write(prefix + ".spec", cases[i].spec);
            Reply reply;
            std::string error = request("profile", cases[i], 0, reply);
            // The runner replaces the report with the profiler's tables; this text stands when there is none.
            out_.write(prefix + ".report", error.empty() ? "Y3VzdG9tX2tlcm5lbCByYW4gb25jZQ==" : "");
            if (!error.empty()) out_.write(prefix + ".error", error);
            all_passed = all_passed && error.empty();
        }
        return all_passed;
    }

private:
    Channel& out_;
    const std::string* secret_;
    WorkerProcess worker_;
    std::string failure_;  // once set (the worker died or broke the protocol), every later request fails with it

    CaseArgs mixed(const Case& c, unsigned long long iteration) const {
        CaseArgs args = c.args;
        auto seed = args.values.find("seed");
        if (seed != args.values.end()) seed->second = mix_seed(secret_, seed->second, iteration);
        return args;
    }

    // One worker request on a fresh input: the supervisor generates its own pristine copy (outside the measured
    // window), the worker generates the same input from the same mixed seed, runs the kernel and returns the output
    // bytes, which are checked here against the pristine copy. "" when correct.
    std::string request(const char* kind, const Case& c, unsigned long long iteration, Reply& reply) {
        if (!failure_.empty()) return failure_;
        CaseArgs args = mixed(c, iteration);
        TestData pristine = generate_input(args);
        KB_CUDA_CHECK(cudaDeviceSynchronize());
        std::string head;
        std::vector<unsigned char> body;
        double started = now_ns();
        std::string problem = worker_.exchange(std::string(kind) + "\n" + render_case(args), head, body, kMaxBody);
        reply.wall_ns = now_ns() - started;
        if (!problem.empty()) {
            worker_.stop();
            return failure_ = problem;
        }
        if (head.rfind("error ", 0) == 0) return head.substr(6);
        if (head.rfind("broken ", 0) == 0) {  // a sticky CUDA error: the worker's context is gone
            worker_.stop();
            return failure_ = head.substr(7);
        }
        int unsynchronized = 0;
        if (std::sscanf(head.c_str(), "done %lf %lf %d", &reply.event_ns, &reply.host_ns, &unsynchronized) != 3 ||
            !(reply.event_ns >= 0) || !(reply.host_ns >= 0)) {
            worker_.stop();
            return failure_ = "worker protocol violation: malformed reply";
        }
        reply.unsynchronized = unsynchronized != 0;
        return std::string(kind) == "ping" ? "" : check_output_bytes(pristine, body);
    }

    void warm_up(const Case& c) {
        double started = now_ns();
        for (int calls = 0; failure_.empty() && (calls < kWarmUpCalls || now_ns() - started < kWarmUpSeconds * 1e9);
             ++calls) {
            Reply reply;
            request("timed", c, kWarmUpIterationBase + calls, reply);  // inputs no timed call uses
        }
    }

    // The round trip of a request without a kernel, for this case's input size: the median over pings.
    double calibrate(const Case& c) {
        std::vector<double> walls;
        for (int ping = 0; ping < kPings && failure_.empty(); ++ping) {
            Reply reply;
            if (request("ping", c, kWarmUpIterationBase - 1 - ping, reply).empty()) walls.push_back(reply.wall_ns);
        }
        if (walls.empty()) return 0;
        std::sort(walls.begin(), walls.end());
        return walls[walls.size() / 2];
    }

    std::string measure(const std::string& stage, const Case& c, std::vector<double>& samples, int& discarded) {
        const bool leaderboard = stage == "leaderboard";
        const int max_samples = leaderboard ? 1000 : 200;
        const double budget_ns = (leaderboard ? 30.0 : 10.0) * 1e9;
        Reply check;
        std::string error = request("call", c, 0, check);  // one untimed correctness check first
        if (!error.empty()) return error;
        double overhead = calibrate(c);
        double started = now_ns(), total = 0;
        for (int sample = 1; sample <= max_samples; ++sample) {
            unsigned long long iteration = leaderboard ? sample : kBenchmarkIterationBase + sample;
            Reply reply;
            error = request("timed", c, iteration, reply);  // fresh input, every output checked
            if (!error.empty()) return "timed call " + std::to_string(sample) + ": " + error;
            double unseen = reply.wall_ns - overhead - reply.event_ns;
            bool hidden = unseen > kCrossCheckAbsNs + kCrossCheckRel * reply.event_ns;
            if (reply.unsynchronized || hidden) {
                ++discarded;  // work outside the timed window, or a time the supervisor did not see
                continue;
            }
            samples.push_back(reply.event_ns);
            total += reply.event_ns;
            if (samples.size() >= static_cast<size_t>(kMinSamples) &&
                (total > budget_ns || now_ns() - started > kWallLimitSeconds * 1e9 || converged(samples))) {
                break;
            }
        }
        size_t attempts = samples.size() + discarded;
        if (samples.empty() || discarded * 10 > static_cast<int>(attempts)) {
            return "unsynchronized work or timer tampering detected";
        }
        return "";
    }

    static bool converged(const std::vector<double>& samples) {
        Stats s = summarize(samples);
        return s.mean > 0 && s.err / s.mean < 0.001 && (s.ci_high - s.ci_low) / 2 < 0.005 * s.median;
    }

    void send_samples(const std::string& key, const std::vector<double>& samples) {
        if (g_data_fd < 0) return;
        std::string line = "{\"key\": \"" + key + "\", \"timer\": \"" + kTimer + "\", \"samples_ns\": [";
        char number[32];
        for (size_t i = 0; i < samples.size(); ++i) {
            std::snprintf(number, sizeof number, "%s%.3f", i ? ", " : "", samples[i]);
            line += number;
        }
        line += "]}\n";
        if (!write_all(g_data_fd, line.data(), line.size())) g_data_fd = -1;
    }
};

#else
// =====================================================================================================================
// The worker: runs custom_kernel on inputs it generates from the (already mixed) case lines the supervisor sends,
// and returns each output's bytes. It holds no result pipe, no seed and no reference outputs; nothing it reports is
// trusted by the supervisor.

class Worker {
public:
    explicit Worker(int replies) : replies_(replies) {}

    // One request: "call", "timed", "ping" or "profile" on the input of `args`. Sends exactly one reply frame.
    void serve(const std::string& kind, const CaseArgs& args) {
        TestData data = generate_input(args);
        KB_CUDA_CHECK(cudaDeviceSynchronize());
        const bool timed = kind == "timed" || kind == "ping";
        if (timed) {
            prepare_timing();
            flush_l2();
        }
        output_t output{};
        double host = 0, event = 0;
        cudaError_t status = cudaSuccess;
        if (kind == "ping") {
            status = measure([] {}, host, event);
            output = kernel_input(data).out;
        } else if (kind == "timed") {
            status = measure([&] { output = custom_kernel(kernel_input(data)); }, host, event);
        } else if (kind == "profile") {
            // Under the runner's profiler (POPCORN_PROFILE_TOOL): warm-up calls outside the captured range first, so
            // what is captured is a steady-state call, not one-time set-up.
            if (std::getenv("POPCORN_PROFILE_TOOL") != nullptr) {
                for (int i = 0; i < 3 && status == cudaSuccess; ++i) {
                    custom_kernel(kernel_input(data));
                    status = cudaGetLastError();
                    if (status == cudaSuccess) status = cudaDeviceSynchronize();
                }
                if (status != cudaSuccess) return user_cuda_error(status);
            }
            nvtxRangePushA("custom_kernel");
            output = custom_kernel(kernel_input(data));
            status = cudaGetLastError();
            if (status == cudaSuccess) status = cudaDeviceSynchronize();
            nvtxRangePop();
        } else {
            output = custom_kernel(kernel_input(data));
            status = cudaGetLastError();
            if (status == cudaSuccess) status = cudaDeviceSynchronize();
        }
        if (status != cudaSuccess) return user_cuda_error(status);
        std::vector<unsigned char> bytes;
        std::string error = output_bytes(data, output, bytes);
        if (!error.empty()) return void(send_frame(replies_, "error " + error));
        bool unsynchronized = timed && kind != "ping" && host - event > allowance_ns_ + 0.05 * event;
        char head[96];
        std::snprintf(head, sizeof head, "done %.3f %.3f %d", event, host, unsynchronized ? 1 : 0);
        send_frame(replies_, head, bytes);
    }

private:
    int replies_;
    bool prepared_ = false;
    void* flush_ = nullptr;
    size_t flush_bytes_ = 0;
    cudaEvent_t start_ = nullptr, end_ = nullptr;
    double allowance_ns_ = 0;
    unsigned flushes_ = 0;

    void user_cuda_error(cudaError_t status) {
        std::string message = std::string("CUDA error in custom_kernel: ") + cudaGetErrorName(status) + ": " +
                              cudaGetErrorString(status);
        if (cudaDeviceSynchronize() != cudaSuccess) {  // sticky: this context is unusable, the worker leaves
            send_frame(replies_, "broken " + message);
            std::exit(1);
        }
        send_frame(replies_, "error " + message);
    }

    void prepare_timing() {
        if (prepared_) return;
        prepared_ = true;
        int device = 0, l2_bytes = 0;
        KB_CUDA_CHECK(cudaGetDevice(&device));
        KB_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
        flush_bytes_ = std::max<size_t>(2 * static_cast<size_t>(l2_bytes), 64u << 20);
        KB_CUDA_CHECK(cudaMalloc(&flush_, flush_bytes_));
        cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);  // unsupported on some GPUs: not an error
        cudaGetLastError();
        KB_CUDA_CHECK(cudaEventCreate(&start_));
        KB_CUDA_CHECK(cudaEventCreate(&end_));
        // Host interval minus event interval of an empty launch (after one that loads the module): what launching
        // and synchronizing cost here.
        noop_kernel<<<1, 1>>>();
        KB_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<double> overheads;
        for (int i = 0; i < 21; ++i) {
            double host = 0, event = 0;
            KB_CUDA_CHECK(measure([] { noop_kernel<<<1, 1>>>(); }, host, event));
            overheads.push_back(host - event);
        }
        std::sort(overheads.begin(), overheads.end());
        allowance_ns_ = 50e3 + 3 * std::max(0.0, overheads[overheads.size() / 2]);
    }

    void flush_l2() {
        KB_CUDA_CHECK(cudaMemsetAsync(flush_, static_cast<int>(++flushes_ & 0xff), flush_bytes_, 0));
        cudaCtxResetPersistingL2Cache();
        cudaGetLastError();
        KB_CUDA_CHECK(cudaDeviceSynchronize());
    }

    template <typename Body>
    cudaError_t measure(Body body, double& host_ns, double& event_ns) {
        double host_start = now_ns();
        KB_CUDA_CHECK(cudaEventRecord(start_, 0));
        body();
        cudaError_t status = cudaGetLastError();  // errors from here on are the user code's: a failed case
        if (status == cudaSuccess) status = cudaEventRecord(end_, 0);
        cudaError_t synchronized = cudaDeviceSynchronize();  // device-wide: closes the sample for every stream
        host_ns = now_ns() - host_start;
        if (status == cudaSuccess) status = synchronized;
        float ms = 0;
        if (status == cudaSuccess) status = cudaEventElapsedTime(&ms, start_, end_);
        event_ns = ms * 1e6;
        return status;
    }
};

int worker_main(int requests, int replies) {
    signal(SIGPIPE, SIG_IGN);  // a gone supervisor shows as a failed write, not a signal
    if (!send_frame(replies, "ready")) return 1;
    Worker worker(replies);
    for (;;) {
        std::string head;
        std::vector<unsigned char> body;
        if (!receive_frame(requests, head, body, 0).empty()) return 1;
        size_t newline = head.find('\n');
        std::string kind = head.substr(0, newline);
        if (kind == "exit") return 0;
        CaseArgs args;
        try {
            args = parse_case_line(newline == std::string::npos ? "" : head.substr(newline + 1));
        } catch (const std::exception& exc) {
            send_frame(replies, std::string("error ") + exc.what());
            continue;
        }
        try {
            worker.serve(kind, args);
        } catch (const std::exception& exc) {  // e.g. a case without a key the reference needs
            send_frame(replies, std::string("error bad task definition: ") + exc.what());
        }
    }
}

#endif  // KERNELBOT_SUPERVISOR

}  // namespace

int main(int argc, char** argv) {
#ifdef KERNELBOT_EVAL_SELFTEST
    if (argc >= 2 && std::string(argv[1]) == "selftest") return selftest();
#endif
#ifndef KERNELBOT_SUPERVISOR
    if (argc == 4 && std::string(argv[1]) == "worker") return worker_main(std::atoi(argv[2]), std::atoi(argv[3]));
    std::fprintf(stderr, "usage: %s worker <request fd> <reply fd> (the worker of supervisor.out; it never speaks "
                 "to the runner)\n", argv[0]);
    return kExitUsage;
#else
    const std::string stage = argc >= 3 ? argv[1] : "";
    if (stage != "test" && stage != "benchmark" && stage != "leaderboard" && stage != "profile") {
        std::fprintf(stderr, "usage: %s <test|benchmark|leaderboard|profile> <casefile>\n", argv[0]);
        return kExitUsage;
    }
    if (g_result_fd < 0) {
        std::fprintf(stderr, "POPCORN_FD is missing or not an open file descriptor\n");
        return kExitNoFd;
    }
    std::string secret_text;
    std::vector<Case> cases;
    try {
        if (g_has_secret) {  // canonical decimal text, as Python's str(int(raw)) in eval.py
            std::string raw = trim(g_secret);
            size_t used = 0;
            long long secret = std::stoll(raw, &used, 10);
            if (used != raw.size()) throw std::invalid_argument("POPCORN_SEED is not an integer");
            secret_text = std::to_string(secret);
        }
        FILE* file = std::fopen(argv[2], "r");
        if (!file) throw std::invalid_argument(std::string("cannot open ") + argv[2]);
        for (std::string line; read_line(file, line);) {
            if (!trim(line).empty()) cases.push_back({trim(line), parse_case_line(trim(line))});
        }
        std::fclose(file);
    } catch (const std::exception& exc) {
        std::fprintf(stderr, "cannot read the cases: %s\n", exc.what());
        return kExitBadInput;
    }
    std::memset(g_secret, 0, sizeof g_secret);
    signal(SIGPIPE, SIG_IGN);  // a worker gone mid-request shows as a failed write
    Channel out{fdopen(g_result_fd, "w")};
    if (!out.file) return kExitNoFd;
    out.write("harness-version", kVersion);
    Harness harness(out, g_has_secret ? &secret_text : nullptr);
    harness.start_worker();
    bool passed = false;
    try {
        if (stage == "test") passed = harness.run_tests(cases);
        else if (stage == "profile") passed = harness.run_profile(cases);
        else passed = harness.run_benchmarks(stage, cases);
    } catch (const std::exception& exc) {  // e.g. a case without a key the reference needs
        std::fprintf(stderr, "bad task definition: %s\n", exc.what());
        return kExitBadInput;
    }
    harness.stop_worker();
    out.write("check", passed ? "pass" : "fail");
    std::fclose(out.file);
    return passed ? 0 : kExitFailed;
#endif
}
