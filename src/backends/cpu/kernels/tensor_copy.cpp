#include "backends/cpu/kernels/tensor_copy.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "core/dispatch.h"
#include "core/thread_pool.h"

namespace ingot::cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;  // elements per parallel chunk, roughly

template <class T>
void copy_run(T* dst, const T* src, int64_t n) {
  if constexpr (std::is_trivially_copyable_v<T>) {
    std::memcpy(dst, src, size_t(n) * sizeof(T));
  } else {
    std::copy_n(src, n, dst);
  }
}

// A dense run of at most 32 bytes as two overlapping fixed-size copies (inlined loads and stores):
// channel concats of channels-last tensors copy one such run per pixel (BlazeFace's 24 + 4 bytes),
// where a call to memcpy per run cost more than the copy.
inline void copy_small(char* dst, const char* src, size_t bytes) {
  auto two = [&]<size_t K>() {
    char head[K], tail[K];
    std::memcpy(head, src, K);
    std::memcpy(tail, src + bytes - K, K);
    std::memcpy(dst, head, K);
    std::memcpy(dst + bytes - K, tail, K);
  };
  if (bytes >= 16) two.template operator()<16>();
  else if (bytes >= 8) two.template operator()<8>();
  else if (bytes >= 4) two.template operator()<4>();
  else
    for (size_t i = 0; i < bytes; ++i) dst[i] = src[i];
}

// One row: n elements with the given strides.
template <class T>
void copy_row(T* dst, const T* src, int64_t n, int64_t dst_stride, int64_t src_stride) {
  if (dst_stride == 1 && src_stride == 1 && std::is_trivially_copyable_v<T> && size_t(n) * sizeof(T) <= 32) {
    copy_small(reinterpret_cast<char*>(dst), reinterpret_cast<const char*>(src), size_t(n) * sizeof(T));
  } else if (dst_stride == 1 && src_stride == 1) {
    copy_run(dst, src, n);
  } else if (dst_stride == 1 && src_stride == 0) {
    std::fill_n(dst, n, *src);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i * dst_stride] = src[i * src_stride];
  }
}

struct Layout {
  Shape shape;
  Strides dst, src;
};

// Drops size-1 axes and merges neighbours that are contiguous with each other on both sides, so
// e.g. a concat of NCHW maps along C becomes one flat run per input.
Layout simplify(const Shape& shape, const Strides& dst, const Strides& src) {
  Layout l;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 1) continue;
    if (!l.shape.empty() && l.dst.back() == dst[k] * shape[k] && l.src.back() == src[k] * shape[k]) {
      l.shape.back() *= shape[k];
      l.dst.back() = dst[k];
      l.src.back() = src[k];
    } else {
      l.shape.push_back(shape[k]);
      l.dst.push_back(dst[k]);
      l.src.push_back(src[k]);
    }
  }
  return l;
}

// Walks the index space of `axes` of a layout in row-major order, tracking both offsets.
class Cursor {
 public:
  Cursor(const Layout& l, std::vector<size_t> axes, int64_t start) : l_(l), axes_(std::move(axes)), idx_(axes_.size()) {
    for (size_t k = axes_.size(); k-- > 0;) {
      int64_t n = l_.shape[axes_[k]];
      idx_[k] = start % n;
      start /= n;
      dst += idx_[k] * l_.dst[axes_[k]];
      src += idx_[k] * l_.src[axes_[k]];
    }
  }
  void next() {
    for (size_t k = axes_.size(); k-- > 0;) {
      size_t a = axes_[k];
      ++idx_[k];
      dst += l_.dst[a];
      src += l_.src[a];
      if (idx_[k] < l_.shape[a]) return;
      dst -= l_.dst[a] * l_.shape[a];
      src -= l_.src[a] * l_.shape[a];
      idx_[k] = 0;
    }
  }
  int64_t dst = 0, src = 0;

 private:
  const Layout& l_;
  std::vector<size_t> axes_;
  std::vector<int64_t> idx_;
};

template <class T>
void copy_rows(T* dst, const T* src, const Layout& l) {
  size_t r = l.shape.size();
  int64_t n = l.shape.back(), ds = l.dst.back(), ss = l.src.back();
  if (r == 1) {
    parallel_for(n, 2 * kGrain, [&](int64_t b, int64_t e) { copy_row(dst + b * ds, src + b * ss, e - b, ds, ss); });
    return;
  }
  if (r == 2) {  // rows of one run each (a channel concat): no cursor
    const int64_t rd = l.dst[0], rs = l.src[0];
    parallel_for(l.shape[0], std::max<int64_t>(1, kGrain / n), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) copy_row(dst + row * rd, src + row * rs, n, ds, ss);
    });
    return;
  }
  std::vector<size_t> outer(r - 1);
  int64_t rows = 1;
  for (size_t k = 0; k + 1 < r; ++k) {
    outer[k] = k;
    rows *= l.shape[k];
  }
  parallel_for(rows, std::max<int64_t>(1, kGrain / n), [&](int64_t b, int64_t e) {
    Cursor c(l, outer, b);
    for (int64_t row = b; row < e; ++row, c.next()) copy_row(dst + c.dst, src + c.src, n, ds, ss);
  });
}

// Scalar tile: dst[i * da + j] = src[i + j * sb] for i in [a0, a1), j in [b0, b1).
template <class T>
void transpose_tile(T* d, const T* s, int64_t da, int64_t sb, int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  if (a0 >= a1 || b0 >= b1) return;
  if (b1 - b0 >= a1 - a0) {  // longer side innermost: contiguous writes
    for (int64_t i = a0; i < a1; ++i) {
      T* drow = d + i * da;
      const T* srow = s + i;
      for (int64_t j = b0; j < b1; ++j) drow[j] = srow[j * sb];
    }
  } else {  // contiguous reads
    for (int64_t j = b0; j < b1; ++j) {
      T* dcol = d + j;
      const T* scol = s + j * sb;
      for (int64_t i = a0; i < a1; ++i) dcol[i * da] = scol[i];
    }
  }
}

#ifdef __AVX2__
// 8x8 block of 4-byte elements: dst row k (stride dst_stride) = source column k. Shuffles move
// bits unchanged, so this serves every 4-byte dtype.
inline void transpose8x8_32(const uint32_t* src, int64_t src_stride, uint32_t* dst, int64_t dst_stride) {
  auto load = [&](int j) { return _mm256_loadu_ps(reinterpret_cast<const float*>(src + j * src_stride)); };
  __m256 r0 = load(0), r1 = load(1), r2 = load(2), r3 = load(3), r4 = load(4), r5 = load(5), r6 = load(6), r7 = load(7);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)),
         s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)),
         s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)),
         s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)),
         s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  auto store = [&](int k, __m256 v) { _mm256_storeu_ps(reinterpret_cast<float*>(dst + k * dst_stride), v); };
  store(0, _mm256_permute2f128_ps(s0, s4, 0x20));
  store(1, _mm256_permute2f128_ps(s1, s5, 0x20));
  store(2, _mm256_permute2f128_ps(s2, s6, 0x20));
  store(3, _mm256_permute2f128_ps(s3, s7, 0x20));
  store(4, _mm256_permute2f128_ps(s0, s4, 0x31));
  store(5, _mm256_permute2f128_ps(s1, s5, 0x31));
  store(6, _mm256_permute2f128_ps(s2, s6, 0x31));
  store(7, _mm256_permute2f128_ps(s3, s7, 0x31));
}

template <>
void transpose_tile<uint32_t>(uint32_t* d, const uint32_t* s, int64_t da, int64_t sb, int64_t a0, int64_t a1,
                              int64_t b0, int64_t b1) {
  int64_t a8 = a0 + (a1 - a0) / 8 * 8, b8 = b0 + (b1 - b0) / 8 * 8;
  for (int64_t i = a0; i < a8; i += 8) {
    for (int64_t j = b0; j < b8; j += 8) transpose8x8_32(s + j * sb + i, sb, d + i * da + j, da);
  }
  // Edges that do not fill an 8x8 block.
  for (int64_t i = a0; i < a8; ++i) {
    for (int64_t j = b8; j < b1; ++j) d[i * da + j] = s[i + j * sb];
  }
  for (int64_t i = a8; i < a1; ++i) {
    for (int64_t j = b0; j < b1; ++j) d[i * da + j] = s[i + j * sb];
  }
}
#endif

// A transpose-like copy: axis `a` is unit-stride in the source, the last axis is unit-stride in the
// destination. Copies 2-D tiles of (a, last) so reads and writes both stay within a few cache lines.
template <class T>
void copy_tiled(T* dst, const T* src, const Layout& l, size_t a) {
  size_t r = l.shape.size(), b = r - 1;
  int64_t na = l.shape[a], nb = l.shape[b];
  int64_t da = l.dst[a], sb = l.src[b];
  int64_t ta = std::min<int64_t>(na, 32);
  int64_t tb = std::max<int64_t>(32, 1024 / ta);
  if (tb > nb) {
    tb = nb;
    ta = std::min<int64_t>(na, std::max<int64_t>(32, 1024 / tb));
  }
  int64_t tiles_a = (na + ta - 1) / ta, tiles_b = (nb + tb - 1) / tb;
  std::vector<size_t> outer;
  int64_t outer_count = 1;
  for (size_t k = 0; k < b; ++k) {
    if (k == a) continue;
    outer.push_back(k);
    outer_count *= l.shape[k];
  }
  int64_t items = outer_count * tiles_a * tiles_b;
  parallel_for(items, std::max<int64_t>(1, kGrain / (ta * tb)), [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      Cursor c(l, outer, item / (tiles_a * tiles_b));
      int64_t tile = item % (tiles_a * tiles_b);
      int64_t a0 = (tile / tiles_b) * ta, b0 = (tile % tiles_b) * tb;
      transpose_tile(dst + c.dst, src + c.src, da, sb, a0, std::min(na, a0 + ta), b0, std::min(nb, b0 + tb));
    }
  });
}

template <class T>
void copy_strided_typed(T* dst, const Strides& dst_strides, const T* src, const Strides& src_strides,
                        const Shape& shape) {
  for (int64_t d : shape) {
    if (d == 0) return;
  }
  Layout l = simplify(shape, dst_strides, src_strides);
  if (l.shape.empty()) {
    *dst = *src;
    return;
  }
  size_t r = l.shape.size();
  if (r >= 2 && l.dst.back() == 1 && l.src.back() != 1 && l.src.back() != 0) {
    for (size_t a = 0; a + 1 < r; ++a) {
      if (l.src[a] == 1) {
        copy_tiled(dst, src, l, a);
        return;
      }
    }
  }
  copy_rows(dst, src, l);
}

}  // namespace

Strides contiguous_strides(const Shape& shape) {
  Strides s(shape.size());
  int64_t acc = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    s[k] = acc;
    acc *= shape[k];
  }
  return s;
}

void copy_strided(DType dtype, void* dst, const Strides& dst_strides, const void* src, const Strides& src_strides,
                  const Shape& shape) {
  dispatch_by_size(dtype, [&]<class T>() {
    copy_strided_typed(static_cast<T*>(dst), dst_strides, static_cast<const T*>(src), src_strides, shape);
  });
}

void fill_elements(DType dtype, void* dst, const void* value, int64_t count) {
  dispatch_by_size(dtype, [&]<class T>() {
    T* out = static_cast<T*>(dst);
    const T v = *static_cast<const T*>(value);
    parallel_for(count, 2 * kGrain, [&](int64_t b, int64_t e) { std::fill(out + b, out + e, v); });
  });
}

void transpose_into(DType dtype, void* dst, const void* src, const Shape& shape, const std::vector<int64_t>& perm) {
  Strides in = contiguous_strides(shape);
  Shape out_shape(perm.size());
  Strides src_strides(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) {
    out_shape[k] = shape[size_t(perm[k])];
    src_strides[k] = in[size_t(perm[k])];
  }
  copy_strided(dtype, dst, contiguous_strides(out_shape), src, src_strides, out_shape);
}


}  // namespace ingot::cpu
