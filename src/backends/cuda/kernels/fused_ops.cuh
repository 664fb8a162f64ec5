// Device side of ai.ingot.FusedElementwise (ops/semantics/fused_elementwise.h): the kernel argument
// block, element loads/stores and one function per op. The same text serves twice: nvcc compiles it
// into the library's interpreter kernel (fused_elementwise.cu), and the code generator
// (backends/cuda/fused_codegen.cpp) puts it in front of every kernel it hands to NVRTC. So it
// includes nothing (NVRTC then needs no headers): 16-bit conversions are PTX, names are prefixed.
// The op formulas are the unfused CUDA kernels' (elementwise.cuh), in float32.
#pragma once

#define INGOT_FUSED_MAX_INPUTS 8
#define INGOT_FUSED_MAX_RANK 8
#define INGOT_FUSED_MAX_INSTRS 32

// How an input is addressed from the output's linear index.
#define INGOT_FUSED_SAME 0       // the input has the output's shape: same index
#define INGOT_FUSED_SCALAR 1     // one element
#define INGOT_FUSED_BROADCAST 2  // through strides over the (merged) output dims

struct IngotFusedArgs {
  long long n;  // output elements
  int rank;     // merged output dims
  int num_inputs;
  long long out_dims[INGOT_FUSED_MAX_RANK];
  long long strides[INGOT_FUSED_MAX_INPUTS][INGOT_FUSED_MAX_RANK];  // 0 where broadcast
  int mode[INGOT_FUSED_MAX_INPUTS];
  const void* in[INGOT_FUSED_MAX_INPUTS];
  void* out;
  float consts[2 * INGOT_FUSED_MAX_INSTRS];  // instruction j's immediate operands at 2j (a) and 2j + 1 (b)
};

// Element types: 0 float32, 1 float16, 2 bfloat16 (the 16-bit ones converted from and to their bits).
template <int D>
__device__ __forceinline__ float ingot_fused_from_bits(unsigned short h) {
  float f;
  if (D == 1) {
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  } else {
    f = __uint_as_float(static_cast<unsigned int>(h) << 16);
  }
  return f;
}

template <int D>
__device__ __forceinline__ unsigned short ingot_fused_to_bits(float v) {
  unsigned short h;
  if (D == 1) {
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
  } else {
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
  }
  return h;
}

template <int D>
__device__ __forceinline__ float ingot_fused_load(const void* p, long long i) {
  if (D == 0) return static_cast<const float*>(p)[i];
  return ingot_fused_from_bits<D>(static_cast<const unsigned short*>(p)[i]);
}

template <int D>
__device__ __forceinline__ void ingot_fused_store(void* p, long long i, float v) {
  if (D == 0) {
    static_cast<float*>(p)[i] = v;
    return;
  }
  static_cast<unsigned short*>(p)[i] = ingot_fused_to_bits<D>(v);
}

__device__ __forceinline__ long long ingot_fused_offset(const IngotFusedArgs& a, int k, long long i) {
  if (a.mode[k] == INGOT_FUSED_SAME) return i;
  if (a.mode[k] == INGOT_FUSED_SCALAR) return 0;
  long long off = 0;
#pragma unroll
  for (int d = INGOT_FUSED_MAX_RANK - 1; d >= 0; --d) {
    if (d < a.rank) {
      const long long q = i / a.out_dims[d];
      off += (i - q * a.out_dims[d]) * a.strides[k][d];
      i = q;
    }
  }
  return off;
}

// 16 bytes per thread per access (generated kernels): when the output's size is a multiple of the
// lane count and every input is read at the output's index (SAME, 16-byte aligned) or is one element
// (SCALAR), each thread moves 4 float32 or 8 16-bit elements per load and store instead of one
// (2-byte accesses kept 16-bit chains at about half the memory bandwidth; 8-byte ones, four 16-bit
// lanes, ran Whisper-tiny's erf GELU over [32, 1500, 1536] at 2.3 TB/s on an H100).
template <int D>
__device__ __forceinline__ constexpr int ingot_fused_lanes() {
  return D == 0 ? 4 : 8;
}
struct alignas(16) IngotFusedF32x4 {
  float v[4];
};
struct alignas(16) IngotFusedU16x8 {
  unsigned short v[8];
};

template <int D>
__device__ __forceinline__ bool ingot_fused_vec(const IngotFusedArgs& a) {
  const unsigned long long align = 16;
  if ((a.n % ingot_fused_lanes<D>()) != 0 || (reinterpret_cast<unsigned long long>(a.out) & (align - 1)) != 0)
    return false;
  for (int k = 0; k < a.num_inputs; ++k) {
    if (a.mode[k] == INGOT_FUSED_SCALAR) continue;
    if (a.mode[k] != INGOT_FUSED_SAME || (reinterpret_cast<unsigned long long>(a.in[k]) & (align - 1)) != 0)
      return false;
  }
  return true;
}

// Elements i..i+L-1 (i a multiple of L = ingot_fused_lanes<D>()) of input k.
template <int D>
__device__ __forceinline__ void ingot_fused_loadv(const void* p, int mode, long long i,
                                                  float (&v)[ingot_fused_lanes<D>()]) {
  constexpr int L = ingot_fused_lanes<D>();
  if (mode == INGOT_FUSED_SCALAR) {
    const float s = ingot_fused_load<D>(p, 0);
    for (int l = 0; l < L; ++l) v[l] = s;
  } else if (D == 0) {
    const IngotFusedF32x4 f = static_cast<const IngotFusedF32x4*>(p)[i / L];
    for (int l = 0; l < L; ++l) v[l] = f.v[l];
  } else {
    const IngotFusedU16x8 h = static_cast<const IngotFusedU16x8*>(p)[i / L];
    for (int l = 0; l < L; ++l) v[l] = ingot_fused_from_bits<D>(h.v[l]);
  }
}

template <int D>
__device__ __forceinline__ void ingot_fused_storev(void* p, long long i, const float (&v)[ingot_fused_lanes<D>()]) {
  constexpr int L = ingot_fused_lanes<D>();
  if (D == 0) {
    IngotFusedF32x4 f;
    for (int l = 0; l < L; ++l) f.v[l] = v[l];
    static_cast<IngotFusedF32x4*>(p)[i / L] = f;
  } else {
    IngotFusedU16x8 h;
    for (int l = 0; l < L; ++l) h.v[l] = ingot_fused_to_bits<D>(v[l]);
    static_cast<IngotFusedU16x8*>(p)[i / L] = h;
  }
}

// One function per op, ingot_fused_<Name>(a, b); unary ops ignore b.
__device__ __forceinline__ float ingot_fused_Neg(float a, float) { return -a; }
__device__ __forceinline__ float ingot_fused_Abs(float a, float) { return fabsf(a); }
__device__ __forceinline__ float ingot_fused_Exp(float a, float) { return expf(a); }
__device__ __forceinline__ float ingot_fused_Log(float a, float) { return logf(a); }
__device__ __forceinline__ float ingot_fused_Sqrt(float a, float) { return sqrtf(a); }
__device__ __forceinline__ float ingot_fused_Reciprocal(float a, float) { return 1.0f / a; }
__device__ __forceinline__ float ingot_fused_Sigmoid(float a, float) {
  return a >= 0.0f ? 1.0f / (1.0f + expf(-a)) : expf(a) / (1.0f + expf(a));
}
__device__ __forceinline__ float ingot_fused_Tanh(float a, float) { return tanhf(a); }
__device__ __forceinline__ float ingot_fused_Relu(float a, float) { return a < 0.0f ? 0.0f : a; }
__device__ __forceinline__ float ingot_fused_Erf(float a, float) { return erff(a); }
__device__ __forceinline__ float ingot_fused_Floor(float a, float) { return floorf(a); }
__device__ __forceinline__ float ingot_fused_Ceil(float a, float) { return ceilf(a); }
__device__ __forceinline__ float ingot_fused_Sin(float a, float) { return sinf(a); }
__device__ __forceinline__ float ingot_fused_Cos(float a, float) { return cosf(a); }
__device__ __forceinline__ float ingot_fused_Softplus(float a, float) {
  return a > 0.0f ? a + log1pf(expf(-a)) : log1pf(expf(a));
}
__device__ __forceinline__ float ingot_fused_HardSwish(float a, float) {
  return a * (a + 3.0f < 0.0f ? 0.0f : (a + 3.0f > 6.0f ? 1.0f : (a + 3.0f) / 6.0f));
}
__device__ __forceinline__ float ingot_fused_Add(float a, float b) { return a + b; }
__device__ __forceinline__ float ingot_fused_Sub(float a, float b) { return a - b; }
__device__ __forceinline__ float ingot_fused_Mul(float a, float b) { return a * b; }
__device__ __forceinline__ float ingot_fused_Div(float a, float b) { return a / b; }
__device__ __forceinline__ float ingot_fused_Pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ float ingot_fused_Max(float a, float b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ float ingot_fused_Min(float a, float b) { return (a < b || a != a) ? a : b; }
__device__ __forceinline__ float ingot_fused_LeakyRelu(float a, float b) { return a < 0.0f ? b * a : a; }
