// Int8 depthwise 3x3 convolution, stride 1, channels last, on AVX-512 VNNI + VBMI.
//
// oneDNN's int8 depthwise kernel (jit_int8) works in blocks of 16 channels of int32 lanes, one tap
// at a time; on BlazeFace's 24-channel layers at 128x128 it took 148 us per layer at one thread on an
// AMD EPYC (Zen 4), barely less than Ingot's float32 depthwise kernel (180 us), and those 7 layers
// were a third of the int8 model's time. Here a tap row of three input pixels is one VNNI dot
// product: for the pixel left of an output (x-1, x, x+1 in a row), the bytes of channel c of the
// three pixels (c, C + c and 2C + c from the left pixel's first byte) are gathered by one byte
// permute (vpermt2b, over 128 bytes) into (x[-1][c], x[0][c], x[+1][c], 0) and multiplied with
// (w[c][0], w[c][1], w[c][2], 0) by vpdpbusd, 16 channels at a time: three dot products per 16
// channels of an output pixel instead of nine multiply-adds. Exact int32 sums; the zero points
// through the weights' sums (padding holds X's zero point); the requantization as oneDNN's
// (float32 scale per channel, round to nearest even, saturate).
#include "backends/cpu/kernels/qdepthwise.h"

// GCC 12 warns of the _mm512_undefined_* operands its own intrinsics pass (a known false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "core/flags.h"
#include "core/thread_pool.h"

namespace ingot::cpu {

namespace {

#define INGOT_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")))

bool cpu_has_vnni_vbmi() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi") &&
                          __builtin_cpu_supports("avx512vnni");
  return has;
}

struct Layer {
  int64_t h, w, c;
  int chunks;                           // of 16 channels
  std::vector<int8_t> taps;             // [chunk][row][64]: (w0, w1, w2, 0) per channel
  std::vector<int32_t> offset;          // [c]: bias - x_zp' * sum of the channel's 9 weights
  std::vector<float> multiplier;        // [c]: x_scale * w_scale[c] / y_scale
  int32_t y_zp = 0;
  bool relu = false, signed_x = false, signed_y = false;
  uint8_t padding = 0;                  // X's zero point, as the bytes of X hold it
};

// The layer's constants in registers: per 16-channel chunk the permute's lane mask, the loads' byte
// masks, the three rows' taps, the offsets and multipliers. kHalf: the last 8 (or fewer) channels
// go through 256-bit operations (half the work of 512-bit ones on CPUs that split those in two, as
// Zen 4 does), when their three pixels' bytes lie within 64 bytes (C <= 28: BlazeFace's 24).
template <int kChunks, bool kHalf>
struct Regs {
  static constexpr int kAll = kChunks + (kHalf ? 1 : 0);
  __m512i index, flip, taps[kAll][3], offset[kAll];
  __m512 multiplier[kAll];
  __mmask64 lanes[kAll], a_mask[kAll], b_mask[kAll];
  __mmask16 store[kAll];
  __m512i y_zp, zero;
  bool relu, signed_x, signed_y;

  INGOT_VNNI_TARGET Regs(const Layer& L, const uint8_t* idx) {
    constexpr __mmask64 three = 0x7777777777777777ull;  // byte 3 of each channel's four: the zero tap
    index = _mm512_loadu_si512(idx);
    flip = _mm512_set1_epi8(char(0x80));
    for (int j = 0; j < kAll; ++j) {
      const int64_t c0 = int64_t(j) * 16, valid = std::min<int64_t>(16, L.c - c0);
      lanes[j] = valid == 16 ? three : three & ((1ull << (4 * valid)) - 1);
      const int64_t span = 2 * L.c + valid;  // bytes read from the chunk's first byte in the left pixel
      a_mask[j] = span >= 64 ? ~0ull : (1ull << span) - 1;
      b_mask[j] = span <= 64 ? 0 : span >= 128 ? ~0ull : (1ull << (span - 64)) - 1;
      store[j] = __mmask16((1u << valid) - 1);
      for (int r = 0; r < 3; ++r) taps[j][r] = _mm512_loadu_si512(L.taps.data() + (size_t(j) * 3 + size_t(r)) * 64);
      offset[j] = _mm512_loadu_si512(L.offset.data() + c0);
      multiplier[j] = _mm512_loadu_ps(L.multiplier.data() + c0);
    }
    y_zp = _mm512_set1_epi32(L.y_zp);
    zero = _mm512_setzero_si512();
    relu = L.relu;
    signed_x = L.signed_x;
    signed_y = L.signed_y;
  }

  // One output pixel from the three rows' left pixels `rows` (C bytes per pixel, three pixels each),
  // written to `out` (C bytes).
  INGOT_VNNI_TARGET inline void pixel(const uint8_t* r0, const uint8_t* r1, const uint8_t* r2, uint8_t* out) const {
    const uint8_t* rows[3] = {r0, r1, r2};
#pragma GCC unroll 4
    for (int j = 0; j < kChunks; ++j) {
      __m512i acc = offset[j];
#pragma GCC unroll 3
      for (int r = 0; r < 3; ++r) {
        const uint8_t* p = rows[r] + j * 16;
        __m512i a = _mm512_maskz_loadu_epi8(a_mask[j], p);
        __m512i b = _mm512_maskz_loadu_epi8(b_mask[j], p + 64);
        if (signed_x) {
          a = _mm512_xor_si512(a, flip);
          b = _mm512_xor_si512(b, flip);
        }
        acc = _mm512_dpbusd_epi32(acc, _mm512_maskz_permutex2var_epi8(lanes[j], a, index, b), taps[j][r]);
      }
      __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), multiplier[j]);
      if (relu) f = _mm512_max_ps(f, _mm512_setzero_ps());
      __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(f), y_zp);  // round to nearest even
      if (signed_y) {
        _mm_mask_storeu_epi8(out + j * 16, store[j], _mm512_cvtsepi32_epi8(q));
      } else {
        _mm_mask_storeu_epi8(out + j * 16, store[j], _mm512_cvtusepi32_epi8(_mm512_max_epi32(q, zero)));
      }
    }
    if constexpr (kHalf) {
      constexpr int j = kChunks;
      const __m256i index8 = _mm512_castsi512_si256(index), flip8 = _mm512_castsi512_si256(flip);
      const __mmask32 a_lo = __mmask32(a_mask[j]), b_lo = __mmask32(a_mask[j] >> 32);
      const __mmask32 lanes8 = __mmask32(lanes[j]);
      __m256i acc = _mm512_castsi512_si256(offset[j]);
#pragma GCC unroll 3
      for (int r = 0; r < 3; ++r) {
        const uint8_t* p = rows[r] + j * 16;
        __m256i a = _mm256_maskz_loadu_epi8(a_lo, p);
        __m256i b = _mm256_maskz_loadu_epi8(b_lo, p + 32);
        if (signed_x) {
          a = _mm256_xor_si256(a, flip8);
          b = _mm256_xor_si256(b, flip8);
        }
        acc = _mm256_dpbusd_epi32(acc, _mm256_maskz_permutex2var_epi8(lanes8, a, index8, b),
                                  _mm512_castsi512_si256(taps[j][r]));
      }
      __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), _mm512_castps512_ps256(multiplier[j]));
      if (relu) f = _mm256_max_ps(f, _mm256_setzero_ps());
      __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(f), _mm512_castsi512_si256(y_zp));
      const __mmask8 m = __mmask8(store[j]);
      if (signed_y) {
        _mm_mask_storeu_epi8(out + j * 16, m, _mm256_cvtsepi32_epi8(q));
      } else {
        _mm_mask_storeu_epi8(out + j * 16, m, _mm256_cvtusepi32_epi8(_mm256_max_epi32(q, _mm256_setzero_si256())));
      }
    }
  }
};

// Output rows [begin, end) of batch x rows; `idx`: the permute's 64 indices.
template <int kChunks, bool kHalf>
INGOT_VNNI_TARGET void output_rows(const Layer& L, const uint8_t* x, uint8_t* y, int64_t begin, int64_t end,
                                   const uint8_t* idx) {
  const Regs<kChunks, kHalf> regs(L, idx);
  const int64_t H = L.h, W = L.w, C = L.c, row = W * C;
  std::vector<uint8_t> edge(size_t(9 * C + 128), L.padding);  // a border pixel's neighbourhood
  auto border = [&](const uint8_t* image, int64_t oy, int64_t ox, uint8_t* out) INGOT_VNNI_TARGET {
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 3; ++k) {
        const int64_t iy = oy - 1 + r, ix = ox - 1 + k;
        uint8_t* dst = edge.data() + (r * 3 + k) * C;
        if (iy < 0 || iy >= H || ix < 0 || ix >= W) std::memset(dst, L.padding, size_t(C));
        else std::memcpy(dst, image + iy * row + ix * C, size_t(C));
      }
    regs.pixel(edge.data(), edge.data() + 3 * C, edge.data() + 6 * C, out + ox * C);
  };
  for (int64_t t = begin; t < end; ++t) {
    const int64_t n = t / H, oy = t % H;
    const uint8_t* image = x + n * H * row;
    uint8_t* out = y + (n * H + oy) * row;
    if (oy == 0 || oy == H - 1 || W < 3) {
      for (int64_t ox = 0; ox < W; ++ox) border(image, oy, ox, out);
      continue;
    }
    border(image, oy, 0, out);
    const uint8_t* r0 = image + (oy - 1) * row;
    const uint8_t* r1 = r0 + row;
    const uint8_t* r2 = r1 + row;
    for (int64_t ox = 1; ox < W - 1; ++ox) regs.pixel(r0 + (ox - 1) * C, r1 + (ox - 1) * C, r2 + (ox - 1) * C, out + ox * C);
    border(image, oy, W - 1, out);
  }
}

void run(const Layer& L, const uint8_t* x, uint8_t* y, int64_t batch) {
  // idx[4c + k] = c + k * C (k < 3) over the 128 bytes of the two loads; lane 4c + 3 is masked.
  std::array<uint8_t, 64> idx{};
  for (int c = 0; c < 16; ++c)
    for (int k = 0; k < 3; ++k) idx[size_t(4 * c + k)] = uint8_t((c + k * L.c) & 127);
  parallel_for(batch * L.h, 1, [&](int64_t begin, int64_t end) {
    // A last chunk of at most 8 channels whose bytes lie within 64: 256-bit.
    const bool half = L.c % 16 != 0 && L.c % 16 <= 8 && 2 * L.c + L.c % 16 <= 64;
    const int full = int(L.c / 16) + (L.c % 16 != 0 && !half ? 1 : 0);
    if (half && full == 0) output_rows<0, true>(L, x, y, begin, end, idx.data());
    else if (half && full == 1) output_rows<1, true>(L, x, y, begin, end, idx.data());
    else if (full == 1) output_rows<1, false>(L, x, y, begin, end, idx.data());
    else if (full == 2) output_rows<2, false>(L, x, y, begin, end, idx.data());
    else if (full == 3) output_rows<3, false>(L, x, y, begin, end, idx.data());
    else output_rows<4, false>(L, x, y, begin, end, idx.data());
  });
}

}  // namespace

bool int8_depthwise_3x3(const sem::QConvGeometry& g, const sem::QuantizedProductArgs& a, Tensor& y) {
  const sem::Window& win = g.win;
  if (!cpu_has_vnni_vbmi() || !flags::enabled("INGOT_CPU_INT8_DEPTHWISE") || !g.nhwc || win.in.size() != 2 || g.group != g.channels ||
      g.out_channels != g.channels || g.channels > 56 || g.channels < 1)
    return false;
  for (size_t i = 0; i < 2; ++i) {
    if (win.kernel[i] != 3 || win.strides[i] != 1 || win.dilations[i] != 1 || win.pad_begin[i] != 1 ||
        win.pad_end[i] != 1)
      return false;
  }
  if (!a.quantized_output() || a.residual || a.float_bias || a.runtime_x || a.w->dtype() != DType::Int8) return false;
  for (int32_t z : a.w_zp)
    if (z != 0) return false;
  bool relu = false;
  if (a.steps.size() > 1) return false;
  if (a.steps.size() == 1) {
    if (a.steps[0].kind != sem::EpilogueStep::Kind::Relu || a.steps[0].a != 0) return false;
    relu = true;
  }
  const int64_t C = g.channels;
  Layer L;
  L.h = win.in[0];
  L.w = win.in[1];
  L.c = C;
  L.chunks = int((C + 15) / 16);
  L.relu = relu;
  L.signed_x = a.x->dtype() == DType::Int8;
  L.signed_y = a.y_dtype == DType::Int8;
  L.y_zp = a.y_zp;
  L.padding = uint8_t(a.x_zp);
  const int32_t x_zp = a.x_zp + (L.signed_x ? 128 : 0);  // in the unsigned bytes the dot products see
  const int8_t* w = a.w->data<int8_t>();  // [C, 3, 3, 1]
  L.taps.assign(size_t(L.chunks) * 3 * 64, 0);
  L.offset.assign(size_t(L.chunks) * 16, 0);
  L.multiplier.assign(size_t(L.chunks) * 16, 0.0f);
  const int32_t* bias = a.bias ? a.bias->data<int32_t>() : nullptr;
  for (int64_t c = 0; c < C; ++c) {
    int32_t sum = 0;
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 3; ++k) {
        const int8_t v = w[c * 9 + r * 3 + k];
        L.taps[size_t((c / 16) * 3 + r) * 64 + size_t(c % 16) * 4 + size_t(k)] = v;
        sum += v;
      }
    L.offset[size_t(c)] = (bias ? bias[c] : 0) - x_zp * sum;
    L.multiplier[size_t(c)] = float(double(a.x_scale) * double(a.w_scale_of(c)) / double(a.y_scale));
  }
  run(L, static_cast<const uint8_t*>(a.x->raw_data()), static_cast<uint8_t*>(y.raw_data()), g.batch);
  return true;
}

}  // namespace ingot::cpu
