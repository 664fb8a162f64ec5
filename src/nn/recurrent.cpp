// LSTM and GRU modules (include/ingot/nn.h): PyTorch's parameters, one ONNX LSTM / GRU op per layer.
// PyTorch stacks the gate rows as (i, f, g, o) for an LSTM and (r, z, n) for a GRU; ONNX as
// (i, o, f, c) and (z, r, h). The rows are reordered by Slice + Concat in every forward, so the
// parameters stay PyTorch's (a state_dict from PyTorch loads as it is) and the gradients flow back
// through the reordering.
#include <fmt/format.h>
#include <ingot/nn.h>
#include <ingot/ops.h>

#include <cmath>

#include "nn/constants.h"

namespace ingot::nn {
namespace {

Tensor unsqueeze0(const Tensor& x) { return ops::call("Unsqueeze", {x, int64s({0})}).at(0); }

// Rows [k H, (k + 1) H) of a PyTorch gate stack, in `order`.
Tensor reorder_gates(const Tensor& w, int64_t hidden, const std::vector<int64_t>& order) {
  std::vector<Tensor> parts;
  for (int64_t k : order) parts.push_back(slice(w, 0, k * hidden, (k + 1) * hidden));
  return ops::concat(parts, 0);
}

}  // namespace

RecurrentBase::RecurrentBase(const char* kind, int64_t gates, int64_t input_size, int64_t hidden_size, RNNOptions options)
    : kind_(kind), gates_(gates), input_size_(input_size), hidden_size_(hidden_size), options_(options) {
  if (input_size <= 0 || hidden_size <= 0 || options.num_layers <= 0)
    fail("{}({}, {}, num_layers {}): sizes must be positive", kind, input_size, hidden_size, options.num_layers);
  if (options.dropout < 0 || options.dropout >= 1) fail("{}: dropout {} is not in [0, 1)", kind, options.dropout);
  const int64_t dirs = options.bidirectional ? 2 : 1;
  const double bound = 1.0 / std::sqrt(double(hidden_size));
  for (int64_t layer = 0; layer < options.num_layers; ++layer) {
    const int64_t in = layer == 0 ? input_size : dirs * hidden_size;
    for (int64_t d = 0; d < dirs; ++d) {
      const std::string suffix = fmt::format("_l{}{}", layer, d ? "_reverse" : "");
      auto add = [&](const std::string& name, Shape shape) {
        weights_.push_back(std::make_unique<Tensor>(uniform(std::move(shape), bound)));
        register_parameter(name + suffix, *weights_.back());
      };
      add("weight_ih", {gates * hidden_size, in});
      add("weight_hh", {gates * hidden_size, hidden_size});
      if (options.bias) {
        add("bias_ih", {gates * hidden_size});
        add("bias_hh", {gates * hidden_size});
      }
    }
  }
}

RNNOutput RecurrentBase::run(const Tensor& x, const Tensor& h0, const Tensor& c0) {
  const int64_t dirs = options_.bidirectional ? 2 : 1, layers = options_.num_layers, hidden = hidden_size_;
  const bool lstm = gates_ == 4;
  if (x.rank() != 3 || x.dim(2) != input_size_)
    fail("{}({}, {}): expected an input [{}, {}] ending in {}, got {}", kind_, input_size_, hidden,
         options_.batch_first ? "B, T" : "T, B", input_size_, input_size_, x.describe());
  Tensor seq = options_.batch_first ? ops::transpose(x, {1, 0, 2}) : x;  // [T, B, I]
  const int64_t batch = seq.dim(1);
  auto check_state = [&](const Tensor& s, const char* name) {
    if (s.defined() && (s.rank() != 3 || s.dim(0) != layers * dirs || s.dim(1) != batch || s.dim(2) != hidden))
      fail("{}: {} must be [{}, {}, {}], got {}", kind_, name, layers * dirs, batch, hidden, s.describe());
  };
  check_state(h0, "h0");
  check_state(c0, "c0");
  // PyTorch's gate rows -> ONNX's.
  const std::vector<int64_t> order = lstm ? std::vector<int64_t>{0, 3, 1, 2} : std::vector<int64_t>{1, 0, 2};
  const size_t per_direction = options_.bias ? 4 : 2;
  std::vector<Tensor> h_n, c_n;
  for (int64_t layer = 0; layer < layers; ++layer) {
    std::vector<Tensor> w, r, b;
    for (int64_t d = 0; d < dirs; ++d) {
      const size_t at = size_t(layer * dirs + d) * per_direction;
      w.push_back(unsqueeze0(reorder_gates(*weights_[at], hidden, order)));
      r.push_back(unsqueeze0(reorder_gates(*weights_[at + 1], hidden, order)));
      if (options_.bias)
        b.push_back(unsqueeze0(ops::concat({reorder_gates(*weights_[at + 2], hidden, order),
                                            reorder_gates(*weights_[at + 3], hidden, order)},
                                           0)));
    }
    auto stacked = [](const std::vector<Tensor>& v) { return v.size() == 1 ? v[0] : ops::concat(v, 0); };
    std::vector<Tensor> in{seq, stacked(w), stacked(r), options_.bias ? stacked(b) : Tensor{}, Tensor{}};
    in.push_back(h0.defined() ? slice(h0, 0, layer * dirs, (layer + 1) * dirs) : Tensor{});
    if (lstm) in.push_back(c0.defined() ? slice(c0, 0, layer * dirs, (layer + 1) * dirs) : Tensor{});
    while (!in.back().defined()) in.pop_back();
    Attributes attrs{{"hidden_size", hidden}, {"direction", std::string(dirs == 2 ? "bidirectional" : "forward")}};
    if (!lstm) attrs["linear_before_reset"] = int64_t(1);  // PyTorch's GRU: r * (h R_n^T + b_hn)
    std::vector<Tensor> out = ops::call(kind_, in, attrs, lstm ? 3 : 2);
    // Y [T, dirs, B, H] -> [T, B, dirs * H]
    seq = ops::reshape(ops::transpose(out[0], {0, 2, 1, 3}), {0, 0, -1});
    if (layer + 1 < layers && options_.dropout > 0) seq = functional::dropout(seq, options_.dropout, is_training());
    h_n.push_back(out[1]);
    if (lstm) c_n.push_back(out[2]);
  }
  RNNOutput result;
  result.output = options_.batch_first ? ops::transpose(seq, {1, 0, 2}) : seq;
  result.h_n = h_n.size() == 1 ? h_n[0] : ops::concat(h_n, 0);
  if (lstm) result.c_n = c_n.size() == 1 ? c_n[0] : ops::concat(c_n, 0);
  return result;
}

LSTM::LSTM(int64_t input_size, int64_t hidden_size, RNNOptions options)
    : RecurrentBase("LSTM", 4, input_size, hidden_size, options) {}
RNNOutput LSTM::forward(const Tensor& x, const Tensor& h0, const Tensor& c0) { return run(x, h0, c0); }

GRU::GRU(int64_t input_size, int64_t hidden_size, RNNOptions options)
    : RecurrentBase("GRU", 3, input_size, hidden_size, options) {}
RNNOutput GRU::forward(const Tensor& x, const Tensor& h0) { return run(x, h0, {}); }

}  // namespace ingot::nn
