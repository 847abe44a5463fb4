// Physical limits of the GPU<->host path and the CUDA C peers, measured on the machine
// that runs hostcall_bench, in the same run. Built there with nvcc (the build box has no
// CUDA). Usage: limits OUT.json   (stdout takes the printf flood: send it to /dev/null)
//
//  - roundtrip_us: one GPU thread flips a flag in host-pinned mapped memory, one host
//    thread spins and answers; the floor under any hostcall's latency.
//  - flag_roundtrips_per_s_132_channels: 132 GPU threads (one per block) each flip their
//    own flag pair, one host thread answers them all: the floor under a consumer
//    thread's throughput.
//  - cuda_printf_lines_per_s (132 x 256 threads) and cuda_printf_lines_per_s_1056x256:
//    16 printf lines per thread, FIFO 512 MiB.
//  - cuda_malloc_pairs_per_s: 132 x 256 threads x 256 malloc(64)/free pairs.
//  - d2h_pinned_copy_gb_per_s: cudaMemcpy of 256 MiB from device memory to pinned host
//    memory (best of 5), the bandwidth a tagged stream's rings are judged against.
//  - mapped_store_gb_per_s_132x256: 132 x 256 threads storing 16-byte words, coalesced,
//    straight into the same pinned memory mapped into the device (how stream records
//    travel), 256 MiB.
//  - mapped_record_store_gb_per_s_132x256: the same memory written as 72-byte records
//    (9 words, each lane its own record, word by word, as a stream record's words go
//    when each lane writes its own), 256 MiB.
//  - mapped_batch[_fenced]_gb_per_s_132x256_{16b,72b}_records: stream batches as the
//    writer stores them (32 records of 16 or 72 bytes, word-major, then a commit word),
//    without and with the system fence before each commit word, 256 batches per warp,
//    nothing reading them: the ceiling of the streams' GPU side.
//  - {release_store,fence,rmw_acq_rel}_{gpu,sys}_ns: one GPU thread, 2,000 in a row, each
//    of `st.release`, `fence.acq_rel` and `atom.acq_rel.add` on device memory at GPU and
//    at system scope; handoff_two_sms_{gpu,sys}_ns: two threads on two SMs passing a
//    token through one word (acquire load, release store), per hand-off. What a binary
//    saves by building its atomics at GPU scope (ptx-builder's `scope`).
//  - cuda_{sin,exp,log,pow}[f]_evals_per_s: CUDA's own sin, exp, log, pow(x, 1.7)
//    (double and float), 128 x 128 threads x 65,536 evaluations each: what culinux's
//    math mode (hostcall_bench part `math`) and bench/math's `rate` are judged against.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <cuda_runtime.h>

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                         \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void roundtrip(volatile unsigned *req, volatile unsigned *resp, int n,
                          unsigned long long *ns) {
  unsigned long long t0 = now_ns();
  for (int i = 1; i <= n; i++) {
    *req = i;
    __threadfence_system();
    while (*resp != (unsigned)i) {
    }
  }
  *ns = now_ns() - t0;
}

// Channel b's request flag is flags[32 b], its response flags[32 b + 16]: own cache lines.
__global__ void channels(volatile unsigned *flags, int n) {
  volatile unsigned *req = flags + 32 * blockIdx.x, *resp = req + 16;
  for (int i = 1; i <= n; i++) {
    *req = i;
    __threadfence_system();
    while (*resp != (unsigned)i) {
    }
  }
}

__global__ void printer(int lines) {
  int me = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = 0; i < lines; i++) printf("line %d %d\n", me, i);
}

__global__ void mallocs(int n, unsigned *failed) {
  for (int i = 0; i < n; i++) {
    volatile char *p = (volatile char *)malloc(64);
    if (!p) {
      atomicAdd(failed, 1);
      continue;
    }
    p[0] = (char)i;
    free((void *)p);
  }
}

// Thread t stores words t, t + n, t + 2n, ... (n = all threads): each warp's stores
// fill whole 512-byte lines of the mapped buffer.
__global__ void mapped_stores(uint4 *out, size_t words) {
  size_t n = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += n)
    out[i] = make_uint4((unsigned)i, 1, 2, 3);
}

// Thread t writes records t, t + n, ... of 9 words, one word at a time: at each store
// the lanes of a warp are 72 bytes apart.
__global__ void mapped_records(unsigned long long *out, size_t records) {
  size_t n = (size_t)gridDim.x * blockDim.x;
  for (size_t r = blockIdx.x * blockDim.x + threadIdx.x; r < records; r += n)
    for (int j = 0; j < 9; j++) out[r * 9 + j] = r + j;
}

// Stream batches as hostcall-client writes them, with no host reading: each warp in
// turn writes batches of 32 records of `record` words into its own 64 KiB of the mapped
// buffer, word-major (round k: lane i stores word 32 k + i after the commit word), then
// (with `fenced`) a system fence by every lane, a warp barrier, and lane 0's commit word.
__global__ void mapped_batches(unsigned long long *out, int record, int batches, bool fenced) {
  const int lane = threadIdx.x % 32;
  const size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
  const size_t region = 8192, words = 1 + 32 * (size_t)record;
  unsigned long long *mine = out + warp * region;
  size_t at = 0;
  for (int b = 0; b < batches; b++) {
    if (at + words > region) at = 0;
    for (int k = 0; k < record; k++) mine[at + 1 + 32 * k + lane] = b + k;
    if (fenced) asm volatile("fence.acq_rel.sys;" ::: "memory");
    __syncwarp();
    if (lane == 0) mine[at] = (1ull << 63) | b;
    at += words;
  }
}

static float time_kernel(void (*launch)()) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a));
  launch();
  CK(cudaGetLastError());
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

// Nanoseconds per operation, one thread: out[0..6] = release store, fence and
// acquire-release add, each at GPU then at system scope.
__global__ void scope_costs(unsigned *word, double *out) {
  const int n = 2000;
  unsigned long long t;
#define SCOPE_COST(k, op)                                                                 \
  t = now_ns();                                                                          \
  for (int i = 0; i < n; i++) asm volatile(op ::"l"(word), "r"(i) : "memory");           \
  out[k] = (double)(now_ns() - t) / n;
  SCOPE_COST(0, "st.release.gpu.u32 [%0], %1;")
  SCOPE_COST(1, "st.release.sys.u32 [%0], %1;")
  SCOPE_COST(2, "{ .reg .u32 r; mov.u32 r, %1; fence.acq_rel.gpu; }")
  SCOPE_COST(3, "{ .reg .u32 r; mov.u32 r, %1; fence.acq_rel.sys; }")
  SCOPE_COST(4, "{ .reg .u32 r; atom.acq_rel.gpu.add.u32 r, [%0], %1; }")
  SCOPE_COST(5, "{ .reg .u32 r; atom.acq_rel.sys.add.u32 r, [%0], %1; }")
#undef SCOPE_COST
}

// Blocks 0 and 1 pass a token through `word` `rounds` times each way; block 0 writes
// the nanoseconds per hand-off to `out`.
template <bool SYS>
__global__ void handoff(unsigned *word, int rounds, double *out) {
  unsigned me = blockIdx.x, v;
  unsigned long long t = now_ns();
  for (int r = 0; r < rounds; r++) {
    unsigned want = 2 * r + me;
    do {
      if (SYS) asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(word) : "memory");
      else asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(word) : "memory");
    } while (v != want);
    if (SYS) asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(word), "r"(want + 1) : "memory");
    else asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(word), "r"(want + 1) : "memory");
  }
  if (me == 0) *out = (double)(now_ns() - t) / (2 * rounds);
}

// One of CUDA's own math functions (libdevice's, without fast math), each thread
// evaluating it `n` times at `0.5 + k * 1e-7`, as bench/math's `rate` does on the GPU.
template <typename T, int F>
__global__ void math_rate(int n, double *sink) {
  long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  double acc = 0;
  for (int i = 0; i < n; i++) {
    T x = (T)(0.5 + (double)(t * n + i) * 1e-7);
    T r;
    switch (F) {
      case 0: r = sin(x); break;
      case 1: r = exp(x); break;
      case 2: r = log(x); break;
      default: r = pow(x, (T)1.7); break;
    }
    acc += (double)r;
  }
  if (acc == 12345.0) *sink = acc;  // keeps the loop; never true for these arguments
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: limits OUT.json\n");
    return 2;
  }
  const int iters = 20000;
  unsigned *flags;
  CK(cudaHostAlloc(&flags, 2 * sizeof(unsigned), cudaHostAllocMapped));
  flags[0] = flags[1] = 0;
  unsigned long long *ns;
  CK(cudaMallocManaged(&ns, sizeof *ns));
  std::atomic<bool> stop{false};
  std::thread server([&] {
    volatile unsigned *req = flags, *resp = flags + 1;
    while (!stop.load(std::memory_order_relaxed)) {
      unsigned r = *req;
      if (r != *resp) *resp = r;
    }
  });
  roundtrip<<<1, 1>>>(flags, flags + 1, iters, ns);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  stop = true;
  server.join();
  double roundtrip_us = *ns / 1e3 / iters;

  const int chans = 132, chan_iters = 20000;
  unsigned *cflags;
  CK(cudaHostAlloc(&cflags, chans * 32 * sizeof(unsigned), cudaHostAllocMapped));
  for (int i = 0; i < chans * 32; i++) cflags[i] = 0;
  std::atomic<bool> cstop{false};
  std::thread cserver([&] {
    volatile unsigned *f = cflags;
    while (!cstop.load(std::memory_order_relaxed))
      for (int c = 0; c < chans; c++) {
        unsigned r = f[32 * c];
        if (r != f[32 * c + 16]) f[32 * c + 16] = r;
      }
  });
  static unsigned *g_cflags = cflags;
  float chan_ms = time_kernel([] { channels<<<132, 1>>>(g_cflags, 20000); });
  cstop = true;
  cserver.join();

  const int blocks = 132, threads = 256, lines = 16, pairs = 256;
  CK(cudaDeviceSetLimit(cudaLimitPrintfFifoSize, 512u << 20));
  printer<<<1, 32>>>(1);  // warm up the printf path
  CK(cudaDeviceSynchronize());
  static int g_lines = lines;
  float printf_ms = time_kernel([] { printer<<<132, 256>>>(g_lines); });
  CK(cudaDeviceSynchronize());
  fflush(stdout);
  float printf_big_ms = time_kernel([] { printer<<<1056, 256>>>(g_lines); });
  CK(cudaDeviceSynchronize());
  fflush(stdout);

  CK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 256u << 20));
  unsigned *failed;
  CK(cudaMallocManaged(&failed, sizeof *failed));
  *failed = 0;
  static unsigned *g_failed = failed;
  static int g_pairs = pairs;
  mallocs<<<1, 32>>>(1, failed);  // warm up the device heap
  CK(cudaDeviceSynchronize());
  float malloc_ms = time_kernel([] { mallocs<<<132, 256>>>(g_pairs, g_failed); });

  const size_t copy_bytes = 256u << 20;
  void *dev_buf, *pinned, *mapped;
  CK(cudaMalloc(&dev_buf, copy_bytes));
  CK(cudaMemset(dev_buf, 1, copy_bytes));
  CK(cudaHostAlloc(&pinned, copy_bytes, cudaHostAllocMapped));
  float best_copy_ms = 1e30f;
  for (int i = 0; i < 5; i++) {
    static void *g_dev, *g_pinned;
    g_dev = dev_buf;
    g_pinned = pinned;
    float ms = time_kernel([] { CK(cudaMemcpyAsync(g_pinned, g_dev, 256u << 20, cudaMemcpyDeviceToHost)); });
    if (ms < best_copy_ms) best_copy_ms = ms;
  }
  CK(cudaHostGetDevicePointer(&mapped, pinned, 0));
  static uint4 *g_mapped = (uint4 *)mapped;
  mapped_stores<<<132, 256>>>(g_mapped, 1024);  // warm up
  CK(cudaDeviceSynchronize());
  float best_store_ms = 1e30f;
  for (int i = 0; i < 5; i++) {
    float ms = time_kernel([] { mapped_stores<<<132, 256>>>(g_mapped, (256u << 20) / 16); });
    if (ms < best_store_ms) best_store_ms = ms;
  }

  static unsigned long long *g_records = (unsigned long long *)mapped;
  float best_record_ms = 1e30f;
  for (int i = 0; i < 5; i++) {
    float ms = time_kernel([] { mapped_records<<<132, 256>>>(g_records, (256u << 20) / 72); });
    if (ms < best_record_ms) best_record_ms = ms;
  }

  // 132 x 256 threads = 1056 warps x 64 KiB = 66 MiB of the 256 MiB buffer.
  static unsigned long long *g_batches = (unsigned long long *)mapped;
  static int g_record;
  static bool g_fenced;
  double batch_gb_per_s[2][2];
  for (int r = 0; r < 2; r++) {
    for (int fenced = 0; fenced < 2; fenced++) {
      g_record = r == 0 ? 2 : 9;
      g_fenced = fenced;
      float best = 1e30f;
      for (int i = 0; i < 3; i++) {
        float ms = time_kernel([] { mapped_batches<<<132, 256>>>(g_batches, g_record, 256, g_fenced); });
        if (ms < best) best = ms;
      }
      batch_gb_per_s[r][fenced] = 1056.0 * 256 * (1 + 32 * g_record) * 8 / (best / 1e3) / 1e9;
    }
  }

  unsigned *word;
  double *scope;
  CK(cudaMalloc(&word, sizeof *word));
  CK(cudaMallocManaged(&scope, 8 * sizeof *scope));
  scope_costs<<<1, 1>>>(word, scope);
  CK(cudaMemset(word, 0, sizeof *word));
  handoff<false><<<2, 1>>>(word, 20000, scope + 6);
  CK(cudaDeviceSynchronize());
  CK(cudaMemset(word, 0, sizeof *word));
  handoff<true><<<2, 1>>>(word, 20000, scope + 7);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  // CUDA's math functions: 128 blocks x 128 threads (one block an SM) x 65,536
  // evaluations, as culinux's math mode and bench/math's `rate 16384 65536`.
  const int math_threads = 16384, math_n = 65536;
  double *sink;
  CK(cudaMalloc(&sink, sizeof *sink));
  static double *g_sink = sink;
  static int g_math_n = math_n;
  double math_rate_per_s[8];
  float (*launch[8])() = {
      [] { return time_kernel([] { math_rate<double, 0><<<128, 128>>>(g_math_n, g_sink); }); },
      [] { return time_kernel([] { math_rate<double, 1><<<128, 128>>>(g_math_n, g_sink); }); },
      [] { return time_kernel([] { math_rate<double, 2><<<128, 128>>>(g_math_n, g_sink); }); },
      [] { return time_kernel([] { math_rate<double, 3><<<128, 128>>>(g_math_n, g_sink); }); },
      [] { return time_kernel([] { math_rate<float, 0><<<128, 128>>>(g_math_n, g_sink); }); },
      [] { return time_kernel([] { math_rate<float, 1><<<128, 128>>>(g_math_n, g_sink); }); },
      [] { return time_kernel([] { math_rate<float, 2><<<128, 128>>>(g_math_n, g_sink); }); },
      [] { return time_kernel([] { math_rate<float, 3><<<128, 128>>>(g_math_n, g_sink); }); },
  };
  for (int i = 0; i < 8; i++) {
    launch[i]();  // warm up
    math_rate_per_s[i] = (double)math_threads * math_n / (launch[i]() / 1e3);
  }

  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  FILE *f = fopen(argv[1], "w");
  if (!f) return 1;
  fprintf(f,
          "{\"device\": \"%s\", \"roundtrip_us\": %.4f, "
          "\"flag_roundtrips_per_s_132_channels\": %.1f, \"cuda_printf_lines_per_s\": %.1f, "
          "\"cuda_printf_lines_per_s_1056x256\": %.1f, "
          "\"cuda_malloc_pairs_per_s\": %.1f, \"cuda_malloc_failures\": %u, "
          "\"d2h_pinned_copy_gb_per_s\": %.2f, \"mapped_store_gb_per_s_132x256\": %.2f, "
          "\"mapped_record_store_gb_per_s_132x256\": %.2f, "
          "\"mapped_batch_gb_per_s_132x256_16b_records\": %.2f, "
          "\"mapped_batch_fenced_gb_per_s_132x256_16b_records\": %.2f, "
          "\"mapped_batch_gb_per_s_132x256_72b_records\": %.2f, "
          "\"mapped_batch_fenced_gb_per_s_132x256_72b_records\": %.2f, "
          "\"release_store_gpu_ns\": %.1f, \"release_store_sys_ns\": %.1f, "
          "\"fence_gpu_ns\": %.1f, \"fence_sys_ns\": %.1f, "
          "\"rmw_acq_rel_gpu_ns\": %.1f, \"rmw_acq_rel_sys_ns\": %.1f, "
          "\"handoff_two_sms_gpu_ns\": %.1f, \"handoff_two_sms_sys_ns\": %.1f, "
          "\"cuda_sin_evals_per_s\": %.4e, \"cuda_exp_evals_per_s\": %.4e, "
          "\"cuda_log_evals_per_s\": %.4e, \"cuda_pow_evals_per_s\": %.4e, "
          "\"cuda_sinf_evals_per_s\": %.4e, \"cuda_expf_evals_per_s\": %.4e, "
          "\"cuda_logf_evals_per_s\": %.4e, \"cuda_powf_evals_per_s\": %.4e}\n",
          prop.name, roundtrip_us, (double)chans * chan_iters / (chan_ms / 1e3),
          blocks * threads * lines / (printf_ms / 1e3),
          1056.0 * threads * lines / (printf_big_ms / 1e3),
          blocks * threads * pairs / (malloc_ms / 1e3), *failed,
          copy_bytes / (best_copy_ms / 1e3) / 1e9, copy_bytes / (best_store_ms / 1e3) / 1e9,
          (double)((256u << 20) / 72 * 72) / (best_record_ms / 1e3) / 1e9,
          batch_gb_per_s[0][0], batch_gb_per_s[0][1], batch_gb_per_s[1][0],
          batch_gb_per_s[1][1], scope[0], scope[1], scope[2], scope[3], scope[4], scope[5],
          scope[6], scope[7], math_rate_per_s[0], math_rate_per_s[1], math_rate_per_s[2],
          math_rate_per_s[3], math_rate_per_s[4], math_rate_per_s[5], math_rate_per_s[6],
          math_rate_per_s[7]);
  fclose(f);
  return 0;
}
