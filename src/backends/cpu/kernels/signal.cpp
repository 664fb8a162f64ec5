// DFT, STFT, window functions and MelWeightMatrix on the CPU.
//
// Transforms are computed in double: a power-of-two length uses an iterative radix-2 FFT, any
// other length a direct O(n^2) sum over a precomputed twiddle table (exact angles, index k*j mod n).
#include <cmath>
#include <complex>
#include <numbers>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"

namespace ingot {
namespace {

using cdouble = std::complex<double>;

// A one-dimensional transform of length n; forward uses exp(-2 pi i k j / n), inverse exp(+...)
// and divides by n.
class Transform {
 public:
  Transform(int64_t n, bool inverse) : n_(n), inverse_(inverse), twiddle_(size_t(n)) {
    const double sign = inverse ? 1.0 : -1.0;
    for (int64_t k = 0; k < n; ++k) {
      const double angle = sign * 2.0 * std::numbers::pi * double(k) / double(n);
      twiddle_[size_t(k)] = {std::cos(angle), std::sin(angle)};
    }
    pow2_ = n > 0 && (n & (n - 1)) == 0;
  }

  // data: n values in, n values out (scratch is n values of workspace).
  void run(cdouble* data, cdouble* scratch) const {
    if (n_ == 0) return;
    if (pow2_) {
      fft(data);
    } else {
      for (int64_t k = 0; k < n_; ++k) {
        cdouble sum = 0;
        int64_t idx = 0;  // (k * j) mod n, kept without overflow
        for (int64_t j = 0; j < n_; ++j) {
          sum += data[j] * twiddle_[size_t(idx)];
          idx += k;
          if (idx >= n_) idx -= n_;
        }
        scratch[k] = sum;
      }
      std::copy(scratch, scratch + n_, data);
    }
    if (inverse_) {
      const double scale = 1.0 / double(n_);
      for (int64_t k = 0; k < n_; ++k) data[k] *= scale;
    }
  }
  int64_t size() const { return n_; }

 private:
  void fft(cdouble* a) const {
    for (int64_t i = 1, j = 0; i < n_; ++i) {  // bit-reversal permutation
      int64_t bit = n_ >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (int64_t len = 2; len <= n_; len <<= 1) {
      const int64_t stride = n_ / len;
      for (int64_t i = 0; i < n_; i += len) {
        for (int64_t j = 0; j < len / 2; ++j) {
          const cdouble u = a[i + j];
          const cdouble v = a[i + j + len / 2] * twiddle_[size_t(j * stride)];
          a[i + j] = u + v;
          a[i + j + len / 2] = u - v;
        }
      }
    }
  }

  int64_t n_;
  bool inverse_;
  bool pow2_ = false;
  std::vector<cdouble> twiddle_;
};

int64_t scalar_int_input(const KernelContext& ctx, size_t index, const char* name) {
  const Tensor& t = ctx.input(index);
  INGOT_CHECK(t.numel() == 1, "input {} ({}): expected a scalar, got {}", index, name, shape_str(t.shape()));
  INGOT_CHECK(is_integral(t.dtype()), "input {} ({}): expected an integer, got {}", index, name, dtype_name(t.dtype()));
  return t.item_int(0);
}

void dft(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  INGOT_CHECK(rank >= 2 && (x.dim(-1) == 1 || x.dim(-1) == 2),
              "input 0 (input): expected [..., signal, 1 (real) or 2 (complex)], got {}", shape_str(x.shape()));
  int64_t axis = ctx.opset() >= 20 ? (ctx.has_input(2) ? scalar_int_input(ctx, 2, "axis") : -2) : ctx.attr_int("axis");
  if (axis < 0) axis += rank;
  INGOT_CHECK(axis >= 0 && axis <= rank - 2,
              "axis: expected a signal axis in [{}, {}] (not the last, complex axis), got {}", -rank, rank - 2,
              axis < 0 ? axis - rank : axis);
  const int64_t length = x.dim(axis);
  int64_t n = length;
  if (ctx.has_input(1)) {
    n = scalar_int_input(ctx, 1, "dft_length");
    INGOT_CHECK(n >= 1, "input 1 (dft_length): expected >= 1, got {}", n);
  }
  const bool inverse = ctx.attr_int("inverse") != 0;
  const bool onesided = ctx.attr_int("onesided") != 0;
  INGOT_CHECK(!(inverse && onesided), "attributes inverse and onesided: a onesided inverse DFT is not supported");
  const int64_t n_out = onesided ? n / 2 + 1 : n;
  const int64_t comps = x.dim(-1);

  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < rank - 1; ++d) inner *= x.dim(d);
  Shape out_shape = x.shape();
  out_shape[size_t(axis)] = n_out;
  out_shape.back() = 2;
  Tensor& y = ctx.allocate(0, x.dtype(), out_shape);
  if (y.numel() == 0) return;
  const Transform transform(n, inverse);
  const int64_t copied = std::min(length, n);

  dispatch_float(x.dtype(), [&]<class T>() {
    const T* in = x.data<T>();
    T* out = y.data<T>();
    const int64_t lines = outer * inner;
    const int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, n * 8));
    parallel_for(lines, grain, [&](int64_t begin, int64_t end) {
      std::vector<cdouble> buf(static_cast<size_t>(n)), scratch(static_cast<size_t>(n));
      for (int64_t line = begin; line < end; ++line) {
        const int64_t o = line / inner, i = line % inner;
        const T* src = in + (o * length * inner + i) * comps;
        for (int64_t j = 0; j < copied; ++j) {
          const T* e = src + j * inner * comps;
          buf[size_t(j)] = {double(e[0]), comps == 2 ? double(e[1]) : 0.0};
        }
        std::fill(buf.begin() + copied, buf.end(), cdouble(0));
        transform.run(buf.data(), scratch.data());
        T* dst = out + (o * n_out * inner + i) * 2;
        for (int64_t k = 0; k < n_out; ++k) {
          dst[k * inner * 2] = from_double<T>(buf[size_t(k)].real());
          dst[k * inner * 2 + 1] = from_double<T>(buf[size_t(k)].imag());
        }
      }
    });
  });
}

void stft(KernelContext& ctx) {
  const Tensor& signal = ctx.input(0);
  INGOT_CHECK(signal.rank() == 3 && (signal.dim(2) == 1 || signal.dim(2) == 2),
              "input 0 (signal): expected [batch, length, 1 (real) or 2 (complex)], got {}", shape_str(signal.shape()));
  const int64_t step = scalar_int_input(ctx, 1, "frame_step");
  INGOT_CHECK(step >= 1, "input 1 (frame_step): expected >= 1, got {}", step);
  std::vector<double> window;
  if (ctx.has_input(2)) {
    const Tensor& w = ctx.input(2);
    INGOT_CHECK(w.rank() == 1, "input 2 (window): expected rank 1, got {}", shape_str(w.shape()));
    window.resize(size_t(w.numel()));
    for (int64_t i = 0; i < w.numel(); ++i) window[size_t(i)] = w.item_double(i);
  }
  int64_t frame_length = 0;
  if (ctx.has_input(3)) {
    frame_length = scalar_int_input(ctx, 3, "frame_length");
    INGOT_CHECK(window.empty() || int64_t(window.size()) == frame_length,
                "input 2 (window): length {} differs from frame_length {}", window.size(), frame_length);
  } else {
    INGOT_CHECK(ctx.has_input(2), "inputs 2 (window) and 3 (frame_length): at least one is required");
    frame_length = int64_t(window.size());
  }
  const int64_t batch = signal.dim(0), length = signal.dim(1), comps = signal.dim(2);
  INGOT_CHECK(frame_length >= 1 && frame_length <= length, "frame length: expected in [1, signal length {}], got {}",
              length, frame_length);
  const bool onesided = ctx.attr_int("onesided") != 0;
  INGOT_CHECK(!(onesided && comps == 2), "attribute onesided: must be 0 for a complex signal");
  const int64_t frames = 1 + (length - frame_length) / step;
  const int64_t bins = onesided ? frame_length / 2 + 1 : frame_length;
  Tensor& y = ctx.allocate(0, signal.dtype(), {batch, frames, bins, 2});
  if (y.numel() == 0) return;
  const Transform transform(frame_length, false);

  dispatch_float(signal.dtype(), [&]<class T>() {
    const T* in = signal.data<T>();
    T* out = y.data<T>();
    parallel_for(batch * frames, 1, [&](int64_t begin, int64_t end) {
      std::vector<cdouble> buf(static_cast<size_t>(frame_length)), scratch(static_cast<size_t>(frame_length));
      for (int64_t bf = begin; bf < end; ++bf) {
        const int64_t b = bf / frames, f = bf % frames;
        const T* src = in + (b * length + f * step) * comps;
        for (int64_t j = 0; j < frame_length; ++j) {
          const double w = window.empty() ? 1.0 : window[size_t(j)];
          buf[size_t(j)] = {double(src[j * comps]) * w, comps == 2 ? double(src[j * comps + 1]) * w : 0.0};
        }
        transform.run(buf.data(), scratch.data());
        T* dst = out + bf * bins * 2;
        for (int64_t k = 0; k < bins; ++k) {
          dst[2 * k] = from_double<T>(buf[size_t(k)].real());
          dst[2 * k + 1] = from_double<T>(buf[size_t(k)].imag());
        }
      }
    });
  });
}

// Writes double values into a tensor of the output_datatype attribute.
Tensor& allocate_from_doubles(KernelContext& ctx, const std::vector<double>& values, Shape shape) {
  const int64_t code = ctx.attr_int("output_datatype");
  const DType dt = DType(uint8_t(code));
  INGOT_CHECK((code >= 1 && code <= 7) || code == 10 || code == 11 || code == 12 || code == 13 || code == 16,
              "attribute output_datatype: {} is not a supported numeric type code", code);
  Tensor& y = ctx.allocate(0, dt, std::move(shape));
  dispatch_numeric(dt, [&]<class T>() {
    T* out = y.data<T>();
    for (size_t i = 0; i < values.size(); ++i) out[i] = from_double<T>(values[i]);
  });
  return y;
}

// Generalized cosine window: a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), with N = size when
// periodic and size - 1 when symmetric.
void cosine_window(KernelContext& ctx, double a0, double a1, double a2) {
  const int64_t size = scalar_int_input(ctx, 0, "size");
  INGOT_CHECK(size >= 0, "input 0 (size): expected >= 0, got {}", size);
  const int64_t denom = ctx.attr_int("periodic") != 0 ? size : size - 1;
  std::vector<double> values(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    // A symmetric window of size 1 has N = 0; its only point is at angle 0.
    const double angle = denom > 0 ? 2.0 * std::numbers::pi * double(i) / double(denom) : 0.0;
    values[size_t(i)] = a0 - a1 * std::cos(angle) + a2 * std::cos(2.0 * angle);
  }
  allocate_from_doubles(ctx, values, {size});
}

void hann_window(KernelContext& ctx) { cosine_window(ctx, 0.5, 0.5, 0.0); }
void hamming_window(KernelContext& ctx) { cosine_window(ctx, 25.0 / 46.0, 21.0 / 46.0, 0.0); }
void blackman_window(KernelContext& ctx) { cosine_window(ctx, 0.42, 0.5, 0.08); }

// Follows ONNX's reference (onnx/backend/test/case/node/melweightmatrix.py) exactly, including its
// mel spacing over num_mel_bins + 2 steps and the integer flooring of bin edges.
void mel_weight_matrix(KernelContext& ctx) {
  const int64_t num_mel_bins = scalar_int_input(ctx, 0, "num_mel_bins");
  const int64_t dft_length = scalar_int_input(ctx, 1, "dft_length");
  const int64_t sample_rate = scalar_int_input(ctx, 2, "sample_rate");
  INGOT_CHECK(num_mel_bins >= 1, "input 0 (num_mel_bins): expected >= 1, got {}", num_mel_bins);
  INGOT_CHECK(dft_length >= 1, "input 1 (dft_length): expected >= 1, got {}", dft_length);
  INGOT_CHECK(sample_rate >= 1, "input 2 (sample_rate): expected >= 1, got {}", sample_rate);
  for (size_t i : {size_t(3), size_t(4)})
    INGOT_CHECK(ctx.input(i).numel() == 1 && is_floating(ctx.input(i).dtype()),
                "input {} ({}): expected a floating-point scalar, got {}", i,
                i == 3 ? "lower_edge_hertz" : "upper_edge_hertz", ctx.input(i).describe());
  const float lower = float(ctx.input(3).item_double(0)), upper = float(ctx.input(4).item_double(0));
  INGOT_CHECK(lower >= 0 && lower <= upper,
              "inputs 3, 4 (lower/upper_edge_hertz): expected 0 <= lower <= upper, got {}, {}", lower, upper);
  const int64_t spectrogram_bins = dft_length / 2 + 1;
  const float low_mel = 2595.0f * std::log10(1.0f + lower / 700.0f);
  const float high_mel = 2595.0f * std::log10(1.0f + upper / 700.0f);
  const int64_t edges = num_mel_bins + 2;
  const double mel_step = double((high_mel - low_mel) / float(edges));
  std::vector<int64_t> bin(static_cast<size_t>(edges));
  for (int64_t i = 0; i < edges; ++i) {
    const double hz = 700.0 * (std::pow(10.0, (double(i) * mel_step + double(low_mel)) / 2595.0) - 1.0);
    bin[size_t(i)] = int64_t(std::floor(double(dft_length + 1) * hz / double(sample_rate)));
  }
  std::vector<double> w(size_t(spectrogram_bins * num_mel_bins), 0.0);
  auto set = [&](int64_t row, int64_t col, double v) {
    INGOT_CHECK(row >= 0 && row < spectrogram_bins,
                "upper_edge_hertz: mel bin {} reaches spectrogram bin {}, beyond the {} bins of dft_length {} (keep "
                "upper_edge_hertz <= sample_rate / 2)",
                col, row, spectrogram_bins, dft_length);
    w[size_t(row * num_mel_bins + col)] = v;
  };
  for (int64_t i = 0; i < num_mel_bins; ++i) {
    const int64_t left = bin[size_t(i)], center = bin[size_t(i + 1)], right = bin[size_t(i + 2)];
    if (center == left) {
      set(center, i, 1.0);
    } else {
      for (int64_t j = left; j <= center; ++j) set(j, i, double(j - left) / double(center - left));
    }
    for (int64_t j = center; j < right; ++j) set(j, i, double(right - j) / double(right - center));
  }
  allocate_from_doubles(ctx, w, {spectrogram_bins, num_mel_bins});
}

}  // namespace

INGOT_CPU_KERNEL(DFT, dft).versions(17).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(STFT, stft).versions(17).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(HannWindow, hann_window).versions(17);
INGOT_CPU_KERNEL(HammingWindow, hamming_window).versions(17);
INGOT_CPU_KERNEL(BlackmanWindow, blackman_window).versions(17);
INGOT_CPU_KERNEL(MelWeightMatrix, mel_weight_matrix).versions(17);

}  // namespace ingot
