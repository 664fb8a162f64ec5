// INGOT_HD: a function of ops/semantics compiled for the host and, under nvcc, for the device too
// (the CPU and CUDA kernels share the arithmetic: Philox, batch-norm coefficients).
#pragma once

#if defined(__CUDACC__)
#define INGOT_HD __host__ __device__ __forceinline__
#else
#define INGOT_HD inline
#endif
