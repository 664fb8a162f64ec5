// Backend-neutral argument handling of LSTM, GRU and RNN: input shape and dtype validation (with the
// kernels' error messages), direction/layout/hidden_size/clip attributes, sequence_lens, output
// shapes, and the activation list with its alpha/beta parameters. Used by the CPU and CUDA kernels.
#pragma once
#include <ingot/tensor.h>

#include <cstdint>
#include <vector>

#include "ops/kernel.h"

namespace ingot::sem {

enum class RnnCell : uint8_t { LSTM, GRU, RNN };

inline int rnn_num_gates(RnnCell cell) { return cell == RnnCell::LSTM ? 4 : cell == RnnCell::GRU ? 3 : 1; }

enum class ActKind : uint8_t {
  Sigmoid,
  Tanh,
  Relu,
  Affine,
  LeakyRelu,
  ThresholdedRelu,
  ScaledTanh,
  HardSigmoid,
  Elu,
  Softsign,
  Softplus
};

struct Activation {
  ActKind kind = ActKind::Sigmoid;
  float alpha = 0, beta = 0;
};

// The validated arguments of one LSTM/GRU/RNN node.
struct RnnArgs {
  RnnCell cell = RnnCell::LSTM;
  int64_t num_dirs = 1;  // 2 for bidirectional
  bool reverse = false;  // direction == "reverse" (direction 1 of a bidirectional node always is)
  int64_t layout = 0;    // 0: [seq, batch, ..], 1: [batch, seq, ..]
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int64_t GH = 0;                // gates * hidden
  Shape state_shape;             // of initial_h/initial_c and Y_h/Y_c
  std::vector<int64_t> lengths;  // sequence_lens, empty when absent
  bool padded = false;           // some length is shorter than seq
  size_t acts_per_direction = 0;
  std::vector<Activation> acts;  // acts_per_direction per direction (f, g, h for LSTM)
  float clip = 0;                // 0: no clipping
  bool input_forget = false, linear_before_reset = false;
  size_t num_outputs = 0;  // Y, Y_h (, Y_c) that the node has

  bool is_reverse(int64_t dir) const { return reverse || dir == 1; }
  // Shape of output i (Y, then Y_h and Y_c).
  Shape output_shape(size_t i) const {
    if (i > 0) return state_shape;
    return layout == 0 ? Shape{seq, num_dirs, batch, hidden} : Shape{batch, seq, num_dirs, hidden};
  }
};

// Validates inputs X, W, R, B, sequence_lens, initial_h (, initial_c, P) and the attributes.
RnnArgs rnn_args(const KernelContext& ctx, RnnCell cell);

}  // namespace ingot::sem
