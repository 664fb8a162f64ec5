// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator cuRAND and PyTorch's CUDA ops use: four 32-bit words from a 128-bit
// counter and a 64-bit key, no state. Compiled for the host and the device, so an op that draws
// element i from counter (i / 4, offset) gives the same numbers on every backend
// (ai.ingot.Dropout: the same mask on the CPU and the GPU for one seed).
#pragma once
#include <cstdint>

#include "ops/semantics/host_device.h"

namespace ingot::sem {

struct Philox4 {
  uint32_t v[4];
};

INGOT_HD uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t& hi) {
  const uint64_t p = uint64_t(a) * uint64_t(b);
  hi = uint32_t(p >> 32);
  return uint32_t(p);
}

// Ten rounds over counter (c0, c1, c2, c3) with key (k0, k1).
INGOT_HD Philox4 philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = mulhilo(0xD2511F53u, c0, hi0), lo1 = mulhilo(0xCD9E8D57u, c2, hi1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// Uniform in [0, 1) with 24 random bits (exact in float).
INGOT_HD float uniform01(uint32_t bits) { return float(bits >> 8) * (1.0f / 16777216.0f); }

// Dropout's keep decision for element i under key `seed` and `stream` (the counter's upper half;
// distinct streams of one key never share numbers): kept when its uniform is >= ratio.
INGOT_HD bool dropout_keeps(uint64_t seed, uint64_t stream, uint64_t i, float ratio) {
  const Philox4 r = philox4x32(uint32_t(i >> 2), uint32_t(i >> 34), uint32_t(stream), uint32_t(stream >> 32),
                               uint32_t(seed), uint32_t(seed >> 32));
  return uniform01(r.v[i & 3]) >= ratio;
}

}  // namespace ingot::sem
