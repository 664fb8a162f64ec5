// Folds an inference BatchNormalization into the Conv before it: with s = scale / sqrt(var + eps),
// W'[o, ...] = W[o, ...] * s[o] and B'[o] = (B[o] - mean[o]) * s[o] + bias[o], so the Conv writes
// the normalized output itself. Requires float32 initializers for W, B (if any) and the four BN
// parameters, a Conv output read only by the BN, spatial BN in inference mode with one output. The
// folded weights are new initializers (W may be shared); dead_code drops the old ones when unused.
#include <cmath>

#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;

bool float32_vector(const Tensor* t, int64_t n) {
  return t && t->dtype() == DType::Float32 && t->device() == Device::cpu() && t->numel() == n && t->rank() == 1;
}

}  // namespace

bool fold_batchnorm(Model& model) {
  Graph& g = *model.graph;
  const Readers readers(g);
  std::vector<bool> removed(g.nodes.size(), false);
  bool changed = false;
  for (size_t ci = 0; ci < g.nodes.size(); ++ci) {
    Node& conv = g.nodes[ci];
    if (!is_op(conv, "Conv") || conv.inputs.size() < 2 || conv.outputs.size() != 1) continue;
    auto bi = readers.single(conv.outputs[0]);
    if (!bi || removed[*bi]) continue;
    const Node& bn = g.nodes[*bi];
    if (!is_op(bn, "BatchNormalization") || bn.inputs.size() != 5 || bn.inputs[0] != conv.outputs[0]) continue;
    bool extra_outputs = false;
    for (size_t k = 1; k < bn.outputs.size(); ++k) extra_outputs |= !bn.outputs[k].empty();
    auto attr_int = [&](const char* name, int64_t dflt) {
      auto it = bn.attrs.find(name);
      return it == bn.attrs.end() ? dflt : it->second.i;
    };
    if (extra_outputs || attr_int("training_mode", 0) != 0 || attr_int("spatial", 1) != 1) continue;
    if (model.opset(bn.domain) < 7 && attr_int("is_test", 0) == 0) continue;
    const Tensor* w = constant_initializer(g, conv.inputs[1]);
    if (!w || w->dtype() != DType::Float32 || w->rank() < 3 || w->device() != Device::cpu()) continue;
    const int64_t c_out = w->dim(0);
    const Tensor* b =
        conv.inputs.size() > 2 && !conv.inputs[2].empty() ? constant_initializer(g, conv.inputs[2]) : nullptr;
    if (conv.inputs.size() > 2 && !conv.inputs[2].empty() && !float32_vector(b, c_out)) continue;
    const Tensor* scale = constant_initializer(g, bn.inputs[1]);
    const Tensor* shift = constant_initializer(g, bn.inputs[2]);
    const Tensor* mean = constant_initializer(g, bn.inputs[3]);
    const Tensor* var = constant_initializer(g, bn.inputs[4]);
    if (!float32_vector(scale, c_out) || !float32_vector(shift, c_out) || !float32_vector(mean, c_out) ||
        !float32_vector(var, c_out)) {
      continue;
    }
    auto eps_it = bn.attrs.find("epsilon");
    const double eps = eps_it == bn.attrs.end() ? 1e-5 : double(eps_it->second.f);

    Tensor w2 = w->clone(), b2 = Tensor::empty(DType::Float32, {c_out});
    const int64_t per_out = w->numel() / std::max<int64_t>(c_out, 1);
    float* wp = w2.data<float>();
    float* bp = b2.data<float>();
    for (int64_t o = 0; o < c_out; ++o) {
      const double s = double(scale->data<float>()[o]) / std::sqrt(double(var->data<float>()[o]) + eps);
      for (int64_t k = 0; k < per_out; ++k) wp[o * per_out + k] = float(double(wp[o * per_out + k]) * s);
      const double b0 = b ? double(b->data<float>()[o]) : 0.0;
      bp[o] = float((b0 - double(mean->data<float>()[o])) * s + double(shift->data<float>()[o]));
    }
    const std::string w_name = fresh_name(g, conv.inputs[1] + "_bn");
    g.initializers[w_name] = w2;
    const std::string b_name = fresh_name(g, (b ? conv.inputs[2] : conv.inputs[1]) + "_bn_bias");
    g.initializers[b_name] = b2;
    conv.inputs.resize(3);
    conv.inputs[1] = w_name;
    conv.inputs[2] = b_name;
    conv.outputs[0] = bn.outputs[0];
    removed[*bi] = true;
    changed = true;
  }
  if (!changed) return false;
  std::vector<Node> nodes;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!removed[i]) nodes.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(nodes);
  return true;
}

}  // namespace ingot
