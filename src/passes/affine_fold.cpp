#include "passes/affine_fold.h"

#include <algorithm>
#include <cmath>

#include "passes/pass_util.h"

namespace ingot::passes {

bool float32_vector(const Tensor* t, int64_t n) {
  return t && t->dtype() == DType::Float32 && t->device() == Device::cpu() && t->numel() == n &&
         (t->rank() == 1 || (t->rank() == 2 && t->dim(0) == 1));
}

bool affine_foldable(const Node& node) {
  return (is_op(node, "Conv") || is_op(node, "ConvTranspose") || is_op(node, "Gemm")) && node.inputs.size() >= 2 &&
         node.outputs.size() == 1;
}

std::optional<int64_t> output_channels(const Node& node, const Tensor& w) {
  if (is_op(node, "Conv") && w.rank() >= 3) return w.dim(0);
  // ConvTranspose's W is [C, M / group, k...].
  if (is_op(node, "ConvTranspose") && w.rank() >= 3) return w.dim(1) * attr_int(node, "group", 1);
  if (is_op(node, "Gemm") && w.rank() == 2) {
    auto it = node.attrs.find("transB");
    return w.dim(it != node.attrs.end() && it->second.i != 0 ? 0 : 1);
  }
  return std::nullopt;
}

bool fold_affine(Graph& g, Node& node, const Affine& affine, const std::string& new_output) {
  const bool gemm = is_op(node, "Gemm");
  if (!affine_foldable(node)) return false;
  const Tensor* w = constant_initializer(g, node.inputs[1]);
  if (!w || w->dtype() != DType::Float32 || w->device() != Device::cpu()) return false;
  const std::optional<int64_t> out_channels = output_channels(node, *w);
  if (!out_channels) return false;
  const int64_t channels = *out_channels;
  const bool trans_b = gemm && attr_int(node, "transB", 0) != 0;
  const bool has_bias = node.inputs.size() > 2 && !node.inputs[2].empty();
  const Tensor* b = has_bias ? constant_initializer(g, node.inputs[2]) : nullptr;
  if (has_bias && !float32_vector(b, channels)) return false;
  if (int64_t(affine.s.size()) != channels || int64_t(affine.t.size()) != channels) return false;

  Tensor w2 = w->clone(), b2 = Tensor::empty(DType::Float32, {channels});
  float* wp = w2.data<float>();
  float* bp = b2.data<float>();
  if (is_op(node, "ConvTranspose")) {  // W [C, M/g, k...]: input channel c of group c / (C/g) feeds m = group * M/g + j
    const int64_t group = std::max<int64_t>(attr_int(node, "group", 1), 1);
    const int64_t in_channels = w->dim(0), per_group_out = w->dim(1), per_group_in = in_channels / group;
    const int64_t kernel = w->numel() / std::max<int64_t>(in_channels * per_group_out, 1);
    if (per_group_in * group != in_channels) return false;
    for (int64_t c = 0; c < in_channels; ++c)
      for (int64_t j = 0; j < per_group_out; ++j) {
        const double s = affine.s[size_t(c / per_group_in * per_group_out + j)];
        float* block = wp + (c * per_group_out + j) * kernel;
        for (int64_t k = 0; k < kernel; ++k) block[k] = float(double(block[k]) * s);
      }
  } else if (gemm && !trans_b) {  // B is [K, N]: scale column o
    const int64_t k_dim = w->dim(0);
    for (int64_t k = 0; k < k_dim; ++k)
      for (int64_t o = 0; o < channels; ++o) wp[k * channels + o] = float(double(wp[k * channels + o]) * affine.s[size_t(o)]);
  } else {  // Conv weights [O, ...] or Gemm's transposed B [N, K]: scale row o
    const int64_t per_out = w->numel() / std::max<int64_t>(channels, 1);
    for (int64_t o = 0; o < channels; ++o)
      for (int64_t k = 0; k < per_out; ++k) wp[o * per_out + k] = float(double(wp[o * per_out + k]) * affine.s[size_t(o)]);
  }
  const double beta = gemm ? double(attr_float(node, "beta", 1.0f)) : 1.0;
  for (int64_t o = 0; o < channels; ++o) {
    const double b0 = b ? beta * double(b->data<float>()[o]) : 0.0;
    bp[o] = float(b0 * affine.s[size_t(o)] + affine.t[size_t(o)]);
  }
  const std::string w_name = fresh_name(g, node.inputs[1] + "_folded");
  g.initializers[w_name] = w2;
  const std::string b_name = fresh_name(g, (b ? node.inputs[2] : node.inputs[1]) + "_folded_bias");
  g.initializers[b_name] = b2;
  node.inputs.resize(3);
  node.inputs[1] = w_name;
  node.inputs[2] = b_name;
  if (gemm) {
    Attribute one;
    one.kind = AttrKind::Float;
    one.f = 1.0f;
    node.attrs["beta"] = one;
  }
  node.outputs[0] = new_output;
  return true;
}

std::optional<Affine> batchnorm_affine(const Model& model, const Graph& g, const Node& bn, int64_t channels) {
  if (!is_op(bn, "BatchNormalization") || bn.inputs.size() != 5) return std::nullopt;
  bool extra_outputs = false;
  for (size_t k = 1; k < bn.outputs.size(); ++k) extra_outputs |= !bn.outputs[k].empty();
  if (extra_outputs || attr_int(bn, "training_mode", 0) != 0 || attr_int(bn, "spatial", 1) != 1) return std::nullopt;
  if (model.opset(bn.domain) < 7 && attr_int(bn, "is_test", 0) == 0) return std::nullopt;
  const Tensor* scale = constant_initializer(g, bn.inputs[1]);
  const Tensor* shift = constant_initializer(g, bn.inputs[2]);
  const Tensor* mean = constant_initializer(g, bn.inputs[3]);
  const Tensor* var = constant_initializer(g, bn.inputs[4]);
  if (!float32_vector(scale, channels) || !float32_vector(shift, channels) || !float32_vector(mean, channels) ||
      !float32_vector(var, channels)) {
    return std::nullopt;
  }
  auto eps_it = bn.attrs.find("epsilon");
  const double eps = eps_it == bn.attrs.end() ? 1e-5 : double(eps_it->second.f);
  Affine a;
  for (int64_t o = 0; o < channels; ++o) {
    const double s = double(scale->data<float>()[o]) / std::sqrt(double(var->data<float>()[o]) + eps);
    a.s.push_back(s);
    a.t.push_back(double(shift->data<float>()[o]) - double(mean->data<float>()[o]) * s);
  }
  return a;
}

}  // namespace ingot::passes
