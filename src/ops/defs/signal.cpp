// Signal processing: DFT, STFT, window functions and the mel filter bank.
#include <string>
#include <vector>

#include "ops/gradient.h"
#include "ops/op_def.h"

namespace ingot {
namespace {

using G = GradBuilder;
using V = GradValue;

// DFT is linear; its gradient is the adjoint (complex conjugate transpose) applied to dy. With
// F_kn = exp(-2 pi i k n / L): the forward transform's adjoint is L times the inverse DFT, the
// inverse's (F^H / L) is the forward DFT over L. A onesided output is dy zero-padded to all L bins
// first; a real input keeps the real part; an input zero-padded (or cut) to dft_length L is cut (or
// zero-padded) back to its own length.
void dft_vjp(G& b) {
  if (!b.wants(0)) return;
  const Shape xs = b.static_shape(b.x(0));
  const int64_t rank = int64_t(xs.size());
  int64_t axis = b.opset() >= 20 ? (b.has_input(2) ? int64_t(b.double_value(b.x(2), "axis")) : -2) : b.attr_int("axis");
  if (axis < 0) axis += rank;
  const int64_t length = xs.at(size_t(axis));
  const int64_t dft_length = b.has_input(1) ? int64_t(b.double_value(b.x(1), "dft_length")) : length;
  const bool inverse = b.attr_int("inverse") != 0, onesided = b.attr_int("onesided") != 0;
  V g = b.dy();
  auto pad_axis = [&](const V& v, int64_t extra) {  // zeros appended along the signal axis
    std::vector<int64_t> pads(size_t(2 * rank), 0);
    pads[size_t(rank + axis)] = extra;
    return b.call1("Pad", {v, b.int64s(pads)});
  };
  auto cut_axis = [&](const V& v, int64_t axis_, int64_t end) {
    return b.call1("Slice", {v, b.int64s({0}), b.int64s({end}), b.int64s({axis_})});
  };
  const int64_t bins = b.static_shape(g).at(size_t(axis));
  if (onesided && bins < dft_length) g = pad_axis(g, dft_length - bins);
  std::vector<V> in{g, b.emitter().constant(Tensor::scalar<int64_t>(dft_length))};
  Attributes attrs{{"inverse", int64_t(!inverse)}};
  if (b.emitter().onnx_opset() >= 20) {
    in.push_back(b.emitter().constant(Tensor::scalar<int64_t>(axis)));
  } else {
    attrs["axis"] = axis;
  }
  V adjoint = b.call1("DFT", in, attrs);
  adjoint = b.mul(adjoint, b.scalar(inverse ? 1.0 / double(dft_length) : double(dft_length), adjoint));
  if (xs.back() == 1) adjoint = cut_axis(adjoint, rank - 1, 1);  // a real signal: the real part
  if (dft_length > length) adjoint = cut_axis(adjoint, axis, length);
  if (dft_length < length) adjoint = pad_axis(adjoint, length - dft_length);
  b.grad(0, adjoint);
}

// STFT: frame f of the signal (samples f step .. f step + L - 1) times the window, DFT'd. The
// adjoint: each frame's dy (zero-padded to all L bins when onesided) through F^H (L times the inverse
// DFT), times the window, overlap-added back into the signal (a real signal keeps the real part);
// the window's gradient is the signal's frames times that F^H dy, summed over batch and frames.
void stft_vjp(G& b) {
  const Shape xs = b.static_shape(b.x(0));
  const int64_t batch = xs.at(0), comps = xs.at(2);
  const int64_t step = int64_t(b.double_value(b.x(1), "frame_step"));
  const int64_t frame = b.has_input(3) ? int64_t(b.double_value(b.x(3), "frame_length")) : b.static_shape(b.x(2)).at(0);
  const Shape ys = b.static_shape(b.y());
  const int64_t frames = ys.at(1), bins = ys.at(2);
  V g = b.dy();
  if (bins < frame) g = b.call1("Pad", {g, b.int64s({0, 0, 0, 0, 0, 0, frame - bins, 0})});
  std::vector<V> in{g, b.emitter().constant(Tensor::scalar<int64_t>(frame))};
  Attributes attrs{{"inverse", int64_t(1)}};
  if (b.emitter().onnx_opset() >= 20) {
    in.push_back(b.emitter().constant(Tensor::scalar<int64_t>(2)));
  } else {
    attrs["axis"] = int64_t(2);
  }
  V z = b.call1("DFT", in, attrs);  // [batch, frames, L, 2]
  z = b.mul(z, b.scalar(double(frame), z));
  if (comps == 1) z = b.call1("Slice", {z, b.int64s({0}), b.int64s({1}), b.int64s({3})});
  std::vector<int64_t> positions;  // [frames, L]: the sample each frame element reads
  for (int64_t f = 0; f < frames; ++f) {
    for (int64_t n = 0; n < frame; ++n) positions.push_back(f * step + n);
  }
  const V flat_positions = b.reshape(b.int64s(positions), b.int64s({1, frames * frame, 1}));
  const bool windowed = b.has_input(2);
  const V window = windowed ? b.reshape(b.x(2), b.int64s({1, 1, frame, 1})) : V{};
  if (b.wants(0)) {
    V u = windowed ? b.mul(z, window) : z;
    V where = b.call1("Expand", {flat_positions, b.int64s({batch, frames * frame, comps})});
    V zeros = b.zeros_like(b.x(0));
    b.grad(0, b.call1("ScatterElements", {zeros, where, b.reshape(u, b.int64s({batch, frames * frame, comps}))},
                      {{"axis", int64_t(1)}, {"reduction", "add"}}));
  }
  if (windowed && b.wants(2)) {
    V framed = b.call1("Gather", {b.x(0), b.reshape(b.int64s(positions), b.int64s({frames, frame}))}, {{"axis", int64_t(1)}});
    b.grad(2, b.reduce_sum(b.mul(framed, z), {0, 1, 3}, false));
  }
}

}  // namespace

INGOT_OP(DFT)
    .versions(17)
    .inputs(1, 3)
    .attr("axis", 1)
    .attr("inverse", 0)
    .attr("onesided", 0)
    .summary(
        "Discrete Fourier transform along one axis of a real [..., 1] or complex [..., 2] signal; output is "
        "complex [..., 2]. Optional dft_length input zero-pads or truncates; `axis` is an attribute in "
        "opset 17 and the third input from opset 20.")
    .vjp(dft_vjp);
INGOT_OP(STFT)
    .versions(17)
    .inputs(2, 4)
    .attr("onesided", 1)
    .summary(
        "Short-time Fourier transform of [batch, length, 1|2] frames (frame_step, optional window, optional "
        "frame_length) -> [batch, frames, bins, 2].")
    .vjp(stft_vjp);

#define INGOT_WINDOW_OP(name, text) \
  INGOT_OP(name)                    \
      .no_gradient("a generated window (its input is a length)") \
      .versions(17)                 \
      .inputs(1)                    \
      .attr("output_datatype", 1)   \
      .attr("periodic", 1)          \
      .summary(text " window of the given size (periodic or symmetric), in output_datatype.")
INGOT_WINDOW_OP(HannWindow, "Hann");
INGOT_WINDOW_OP(HammingWindow, "Hamming (alpha = 25/46)");
INGOT_WINDOW_OP(BlackmanWindow, "Blackman");
#undef INGOT_WINDOW_OP

INGOT_OP(MelWeightMatrix)
    .no_gradient("a generated filter bank (its inputs are sizes and frequencies)")
    .versions(17)
    .inputs(5)
    .attr("output_datatype", 1)
    .summary(
        "Mel filter bank [dft_length / 2 + 1, num_mel_bins] from (num_mel_bins, dft_length, sample_rate, "
        "lower_edge_hertz, upper_edge_hertz), as ONNX's reference computes it.");

}  // namespace ingot
