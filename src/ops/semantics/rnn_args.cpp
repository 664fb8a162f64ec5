#include "ops/semantics/rnn_args.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace ingot::sem {
namespace {

struct ActSpec {
  const char* name;  // lower case
  ActKind kind;
  int params;         // how many of (alpha, beta) it consumes from the attribute lists
  float alpha, beta;  // defaults, as for the ONNX operator of the same name
};

constexpr ActSpec kActivations[] = {
    {"sigmoid", ActKind::Sigmoid, 0, 0, 0},
    {"tanh", ActKind::Tanh, 0, 0, 0},
    {"relu", ActKind::Relu, 0, 0, 0},
    {"affine", ActKind::Affine, 2, 1.0f, 0.0f},
    {"leakyrelu", ActKind::LeakyRelu, 1, 0.01f, 0},
    {"thresholdedrelu", ActKind::ThresholdedRelu, 1, 1.0f, 0},
    {"scaledtanh", ActKind::ScaledTanh, 2, 1.0f, 1.0f},
    {"hardsigmoid", ActKind::HardSigmoid, 2, 0.2f, 0.5f},
    {"elu", ActKind::Elu, 1, 1.0f, 0},
    {"softsign", ActKind::Softsign, 0, 0, 0},
    {"softplus", ActKind::Softplus, 0, 0, 0},
};

// The activations of every direction, `per_direction` each (f, g, h for LSTM). activation_alpha
// and activation_beta are consumed in order by the functions that take parameters.
std::vector<Activation> parse_activations(const KernelContext& ctx, size_t per_direction, size_t num_dirs,
                                          const std::vector<std::string>& defaults) {
  std::vector<std::string> names = ctx.has_attr("activations") ? ctx.attr_strings("activations") : defaults;
  if (names.size() == per_direction && num_dirs == 2) {  // one list serves both directions
    std::vector<std::string> once = names;
    names.insert(names.end(), once.begin(), once.end());
  }
  if (names.size() != per_direction * num_dirs) {
    fail("attribute 'activations': expected {} names ({} per direction), got {}", per_direction * num_dirs,
         per_direction, names.size());
  }
  std::vector<float> alphas, betas;
  if (ctx.has_attr("activation_alpha")) alphas = ctx.attr_floats("activation_alpha");
  if (ctx.has_attr("activation_beta")) betas = ctx.attr_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> acts;
  for (const std::string& name : names) {
    std::string lower = name;
    for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    const ActSpec* spec = nullptr;
    for (const ActSpec& s : kActivations) {
      if (lower == s.name) spec = &s;
    }
    if (!spec) fail("attribute 'activations': unknown activation '{}'", name);
    Activation a{spec->kind, spec->alpha, spec->beta};
    if (spec->params >= 1 && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (spec->params >= 2 && next_beta < betas.size()) a.beta = betas[next_beta++];
    acts.push_back(a);
  }
  return acts;
}

void check_shape(const Tensor& t, const Shape& expected, std::string_view what) {
  if (t.shape() != expected) fail("{}: expected shape {}, got {}", what, shape_str(expected), shape_str(t.shape()));
}

}  // namespace

RnnArgs rnn_args(const KernelContext& ctx, RnnCell cell) {
  RnnArgs a;
  a.cell = cell;
  const Tensor &x = ctx.input(0), &w = ctx.input(1), &r = ctx.input(2);
  const DType dtype = x.dtype();
  if (!is_floating(dtype)) fail("input 0 (X): expected a floating-point tensor, got {}", x.describe());
  if (x.rank() != 3) fail("input 0 (X): expected rank 3, got {}", x.describe());
  if (r.rank() != 3) fail("input 2 (R): expected rank 3, got {}", r.describe());
  const std::string& direction = ctx.attr_string("direction");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    fail("attribute 'direction': expected forward, reverse or bidirectional, got '{}'", direction);
  }
  const int64_t num_dirs = a.num_dirs = direction == "bidirectional" ? 2 : 1;
  a.reverse = direction == "reverse";
  const int64_t layout = a.layout = ctx.attr_int("layout");
  if (layout != 0 && layout != 1) fail("attribute 'layout': expected 0 or 1, got {}", layout);
  a.seq = x.dim(layout), a.batch = x.dim(1 - layout), a.input = x.dim(2);
  const int64_t seq = a.seq, batch = a.batch;
  const int64_t hidden = a.hidden = ctx.has_attr("hidden_size") ? ctx.attr_int("hidden_size") : r.dim(2);
  if (hidden <= 0) fail("attribute 'hidden_size': expected a positive value, got {}", hidden);
  const int64_t GH = a.GH = rnn_num_gates(cell) * hidden;
  check_shape(w, {num_dirs, GH, a.input}, "input 1 (W)");
  check_shape(r, {num_dirs, GH, hidden}, "input 2 (R)");
  a.state_shape = layout == 0 ? Shape{num_dirs, batch, hidden} : Shape{batch, num_dirs, hidden};
  const Shape& state_shape = a.state_shape;
  const char* names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  for (size_t i = 1; i < ctx.num_inputs() && i < 8; ++i) {
    if (i != 4 && ctx.has_input(i) && ctx.input(i).dtype() != dtype) {
      fail("input {} ({}): dtype {} differs from X's {}", i, names[i], dtype_name(ctx.input(i).dtype()),
           dtype_name(dtype));
    }
  }
  if (ctx.has_input(3)) check_shape(ctx.input(3), {num_dirs, 2 * GH}, "input 3 (B)");
  if (ctx.has_input(5)) check_shape(ctx.input(5), state_shape, "input 5 (initial_h)");
  if (cell == RnnCell::LSTM && ctx.has_input(6)) check_shape(ctx.input(6), state_shape, "input 6 (initial_c)");
  if (cell == RnnCell::LSTM && ctx.has_input(7)) check_shape(ctx.input(7), {num_dirs, 3 * hidden}, "input 7 (P)");
  if (ctx.has_input(4)) {
    check_shape(ctx.input(4), {batch}, "input 4 (sequence_lens)");
    a.lengths = ctx.input(4).to_int64_vector();  // a host input on every backend
    for (int64_t len : a.lengths) {
      if (len < 0 || len > seq) fail("input 4 (sequence_lens): length {} is outside [0, {}]", len, seq);
    }
  }
  a.padded = std::any_of(a.lengths.begin(), a.lengths.end(), [&](int64_t len) { return len < seq; });

  static const std::vector<std::string> lstm_defaults{"Sigmoid", "Tanh", "Tanh"}, gru_defaults{"Sigmoid", "Tanh"},
      rnn_defaults{"Tanh"};
  const std::vector<std::string>& defaults = cell == RnnCell::LSTM  ? lstm_defaults
                                             : cell == RnnCell::GRU ? gru_defaults
                                                                    : rnn_defaults;
  a.acts_per_direction = defaults.size();
  a.acts = parse_activations(ctx, defaults.size(), size_t(num_dirs), defaults);
  a.clip = ctx.has_attr("clip") ? ctx.attr_float("clip") : 0.0f;
  if (ctx.has_attr("clip") && !(a.clip > 0)) fail("attribute 'clip': expected a positive threshold, got {}", a.clip);
  a.input_forget = cell == RnnCell::LSTM && ctx.attr_int("input_forget") != 0;
  a.linear_before_reset = cell == RnnCell::GRU && ctx.attr_int("linear_before_reset") != 0;
  a.num_outputs = std::min<size_t>(ctx.num_outputs(), cell == RnnCell::LSTM ? 3 : 2);
  return a;
}

}  // namespace ingot::sem
