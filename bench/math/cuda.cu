// CUDA's own math functions (libdevice's, without fast math) over the arguments
// bench/math's `values` uses, written in its file format, so that `math-bench compare
// cuda.bin cpu.bin` gives their distance from glibc's in ulps beside ours. Built with
// nvcc on the GPU machine: `nvcc -O2 -arch=sm_90 bench/math/cuda.cu -o cuda-math`,
// `cuda-math FILE`. Keep FUNCS and arg() in step with src/main.rs's FUNCTIONS and arg().
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

#define ARGS (1 << 16)

struct Func {
  int kind;  // 0: one double, 1: two doubles, 2: one float, 3: two floats
  double lo, hi;
  bool positive;
};

// src/main.rs's FUNCTIONS, in order.
__constant__ Func FUNCS[] = {
    {0, -10, 10, false},   {0, -10, 10, false},   {0, -10, 10, false},  {0, -1, 1, false},
    {0, -1, 1, false},     {0, -10, 10, false},   {1, -10, 10, false},  {0, -20, 20, false},
    {0, -20, 20, false},   {0, -20, 20, false},   {0, -100, 100, false}, {0, 1, 100, true},
    {0, -1, 1, false},     {0, -700, 700, false}, {0, -1000, 1000, false}, {0, -5, 5, false},
    {0, 0, 100, true},     {0, 0, 100, true},     {0, 0, 100, true},    {0, -0.9, 10, false},
    {1, 0, 10, true},      {1, 0, 10, false},     {0, -100, 100, false}, {1, -100, 100, false},
    {2, -10, 10, false},   {2, -10, 10, false},   {2, -10, 10, false},  {2, -1, 1, false},
    {2, -10, 10, false},   {3, -10, 10, false},   {2, -20, 20, false},  {2, -20, 20, false},
    {2, -80, 80, false},   {2, -120, 120, false}, {2, 0, 100, true},    {2, 0, 100, true},
    {2, 0, 100, true},     {3, 0, 10, true},      {2, -100, 100, false},
};
#define NFUNCS 39

__device__ uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__device__ double arg(const Func &f, uint64_t s, uint64_t i) {
  uint64_t r = mix((s * 0x10000001ull) ^ i);
  double x;
  if (i % 2 == 0) {
    // Rounded as Rust rounds it: nvcc would fuse this multiply and add into one fma.
    x = __dadd_rn(f.lo, __dmul_rn(f.hi - f.lo, (double)(r >> 11) / 9007199254740992.0));
  } else if (f.kind >= 2) {
    uint32_t b = (uint32_t)(r >> 32);
    float v;
    memcpy(&v, &b, 4);
    x = (double)v;
    if (!isnan(x)) x = x < -(double)FLT_MAX ? -(double)FLT_MAX : x > (double)FLT_MAX ? (double)FLT_MAX : x;
  } else {
    memcpy(&x, &r, 8);
    if (!isfinite(x)) x = (double)(r >> 12);
  }
  if (isnan(x)) x = 0.5;
  return f.positive ? fabs(x) : x;
}

// compiler-rt's __powidf2, which Rust's powi calls on the CPU and the GPU alike.
__device__ double powi(double a, int b) {
  bool recip = b < 0;
  double r = 1;
  while (true) {
    if (b & 1) r *= a;
    b /= 2;
    if (b == 0) break;
    a *= a;
  }
  return recip ? 1 / r : r;
}

// Rust's `f64 as i32`: saturating, NaN to 0.
__device__ int as_i32(double y) {
  if (isnan(y)) return 0;
  if (y >= 2147483647.0) return INT_MAX;
  if (y <= -2147483648.0) return INT_MIN;
  return (int)y;
}

__device__ double d1(int k, double x) {
  switch (k) {
    case 0: return sin(x);
    case 1: return cos(x);
    case 2: return tan(x);
    case 3: return asin(x);
    case 4: return acos(x);
    case 5: return atan(x);
    case 7: return sinh(x);
    case 8: return cosh(x);
    case 9: return tanh(x);
    case 10: return asinh(x);
    case 11: return acosh(x);
    case 12: return atanh(x);
    case 13: return exp(x);
    case 14: return exp2(x);
    case 15: return expm1(x);
    case 16: return log(x);
    case 17: return log2(x);
    case 18: return log10(x);
    case 19: return log1p(x);
    default: return cbrt(x);  // 22
  }
}

__device__ double d2(int k, double x, double y) {
  switch (k) {
    case 6: return atan2(x, y);
    case 20: return pow(x, y);
    case 21: return powi(x, as_i32(y) % 64);
    default: return hypot(x, y);  // 23
  }
}

__device__ float f1(int k, float x) {
  switch (k) {
    case 24: return sinf(x);
    case 25: return cosf(x);
    case 26: return tanf(x);
    case 27: return asinf(x);
    case 28: return atanf(x);
    case 30: return sinhf(x);
    case 31: return tanhf(x);
    case 32: return expf(x);
    case 33: return exp2f(x);
    case 34: return logf(x);
    case 35: return log2f(x);
    case 36: return log10f(x);
    default: return cbrtf(x);  // 38
  }
}

__device__ float f2(int k, float x, float y) {
  return k == 29 ? atan2f(x, y) : powf(x, y);  // 29, 37
}

__global__ void values(uint64_t *out) {
  uint64_t at = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  if (at >= (uint64_t)NFUNCS * ARGS) return;
  int k = (int)(at / ARGS);
  uint64_t i = at % ARGS;
  const Func &f = FUNCS[k];
  double x = arg(f, k, i), y = arg(f, k + 1000, i);
  uint64_t bits = 0;
  if (f.kind == 0 || f.kind == 1) {
    double v = f.kind == 0 ? d1(k, x) : d2(k, x, y);
    memcpy(&bits, &v, 8);
  } else {
    float v = f.kind == 2 ? f1(k, (float)x) : f2(k, (float)x, (float)y);
    uint32_t b;
    memcpy(&b, &v, 4);
    bits = b;
  }
  out[at] = bits;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: cuda-math FILE\n");
    return 2;
  }
  size_t n = (size_t)NFUNCS * ARGS;
  uint64_t *out;
  if (cudaMallocManaged(&out, n * 8) != cudaSuccess) return 1;
  values<<<(n + 255) / 256, 256>>>(out);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "cuda-math: the kernel failed\n");
    return 1;
  }
  FILE *f = fopen(argv[1], "wb");
  if (!f || fwrite(out, 8, n, f) != n) return 1;
  fclose(f);
  printf("%zu results written to %s\n", n, argv[1]);
  return 0;
}
