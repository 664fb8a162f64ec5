// Signal processing: DFT, STFT, window functions and the mel filter bank.
#include "ops/op_def.h"

namespace ingot {

INGOT_OP(DFT)
    .versions(17)
    .inputs(1, 3)
    .attr("axis", 1)
    .attr("inverse", 0)
    .attr("onesided", 0)
    .summary(
        "Discrete Fourier transform along one axis of a real [..., 1] or complex [..., 2] signal; output is "
        "complex [..., 2]. Optional dft_length input zero-pads or truncates; `axis` is an attribute in "
        "opset 17 and the third input from opset 20.");
INGOT_OP(STFT)
    .versions(17)
    .inputs(2, 4)
    .attr("onesided", 1)
    .summary(
        "Short-time Fourier transform of [batch, length, 1|2] frames (frame_step, optional window, optional "
        "frame_length) -> [batch, frames, bins, 2].");

#define INGOT_WINDOW_OP(name, text) \
  INGOT_OP(name)                    \
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
    .versions(17)
    .inputs(5)
    .attr("output_datatype", 1)
    .summary(
        "Mel filter bank [dft_length / 2 + 1, num_mel_bins] from (num_mel_bins, dft_length, sample_rate, "
        "lower_edge_hertz, upper_edge_hertz), as ONNX's reference computes it.");

}  // namespace ingot
