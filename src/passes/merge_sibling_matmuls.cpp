// For CUDA targets (Pass::cuda_only), on by default (INGOT_MERGE_SIBLING_MATMULS=0 turns it off):
// on an H100 the Whisper-tiny encoder's fp32 package at batch 1 ran 1.616 -> 1.537 ms
// (docs/PERFORMANCE.md). On this project's 2-core CPU the Split's copy costs more than the merged
// GEMM saves: Whisper's q, k, v at batch 1 as one block took 14.4-15.7 ms against 13.8-14.2 at 1
// thread, 7.3-7.8 against 6.9-7.2 at 2.
// Merges matrix products that read the same A with constant weights of the same K (a transformer's
// Q, K and V projections) into one FusedMatMul over the concatenated weights, whose output a Split
// along the last axis hands back under the products' names:
//   FusedMatMul(A, B1, b1), MatMul(A, B2), FusedMatMul(A, B3, b3)
//     -> FusedMatMul(A, [B1 B2 B3], [b1 0 b3]) -> Split(axis -1, [N1, N2, N3]) -> Y1, Y2, Y3
// Only where the products are small enough to leave a GPU's SMs idle one by one: each has fewer than
// kMaxTiles 128 x 128 output tiles (Whisper-tiny's projections at batch 1: 12 x 3 tiles each, three
// products at ~18 TFLOP/s of float32 on an H100). Larger ones fill the GPU alone, and the Split's copy
// (the merged output read and written once more) would cost more than one launch saves.
// Each member: a MatMul or a FusedMatMul without residual or transB, B a constant [K, N_i] of A's
// dtype, A of static shape; the members agree on the activation, and on alpha unless every alpha
// is a power of two (then folded into its B exactly: alpha A B = A (alpha B)). A bias is kept
// for members that have one and zeros stand in for the others.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <ingot/ops.h>

#include "core/flags.h"
#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;

constexpr int64_t kMaxTiles = 96;

struct Member {
  size_t index;
  const Tensor* b;
  const Tensor* bias;  // or null
  float alpha;
};

bool power_of_two(float a) {
  int e = 0;
  return a > 0 && std::frexp(a, &e) == 0.5f;
}

// The member `n` makes when it reads A as its first input, or nothing.
std::optional<Member> member_of(const Graph& g, const Node& n, size_t index) {
  const bool fused = n.domain == kIngotDomain && n.op_type == "FusedMatMul";
  if ((!fused && !is_op(n, "MatMul")) || n.outputs.size() != 1 || n.inputs.size() < 2) return std::nullopt;
  if (fused && (attr_int(n, "transB", 0) != 0 || (n.inputs.size() > 3 && !n.inputs[3].empty()))) return std::nullopt;
  const Tensor* b = constant_initializer(g, n.inputs[1]);
  if (!b || b->rank() != 2 || b->dtype() != value_dtype(g, n.inputs[0])) return std::nullopt;
  const Tensor* bias = fused && n.inputs.size() > 2 && !n.inputs[2].empty() ? constant_initializer(g, n.inputs[2]) : nullptr;
  if (fused && n.inputs.size() > 2 && !n.inputs[2].empty() && (!bias || bias->numel() != b->dim(1))) return std::nullopt;
  return Member{index, b, bias, fused ? attr_float(n, "alpha", 1.0f) : 1.0f};
}

std::string activation_of(const Node& n) {
  auto it = n.attrs.find("activation");
  return it == n.attrs.end() ? std::string() : it->second.s;
}

}  // namespace

bool merge_sibling_matmuls(Model& model) {
  if (!flags::enabled("INGOT_MERGE_SIBLING_MATMULS")) return false;
  Graph& g = *model.graph;
  // Candidates by (A, K, activation), in graph order.
  std::map<std::string, std::vector<Member>> groups;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    auto m = member_of(g, g.nodes[i], i);
    if (!m) continue;
    const std::string key = g.nodes[i].inputs[0] + "\n" + std::to_string(m->b->dim(0)) + "\n" + activation_of(g.nodes[i]);
    groups[key].push_back(*m);
  }
  std::vector<bool> removed(g.nodes.size(), false);
  std::map<size_t, std::vector<Node>> replacements;  // each merged product, then its Split
  bool changed = false;
  for (auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    const Node& first = g.nodes[members[0].index];
    auto a_shape = static_shape(g, first.inputs[0]);
    if (!a_shape || a_shape->empty()) continue;
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < a_shape->size(); ++d) rows *= (*a_shape)[d];
    bool small = true, same_alpha = true, exact = true;
    for (const Member& m : members) {
      small &= ((rows + 127) / 128) * ((m.b->dim(1) + 127) / 128) < kMaxTiles;
      same_alpha &= m.alpha == members[0].alpha;
      exact &= power_of_two(m.alpha);
    }
    if (!small || (!same_alpha && !exact)) continue;
    const float alpha = same_alpha ? members[0].alpha : 1.0f;
    std::vector<Tensor> bs, biases;
    std::vector<int64_t> widths;
    bool any_bias = false;
    for (const Member& m : members) {
      Tensor b = *m.b;
      if (m.alpha != alpha) b = ops::mul(b, Tensor::scalar<float>(m.alpha).cast(b.dtype()));
      bs.push_back(b);
      widths.push_back(m.b->dim(1));
      any_bias |= m.bias != nullptr;
    }
    if (any_bias) {
      for (const Member& m : members)
        biases.push_back(m.bias ? m.bias->reshape({m.b->dim(1)}) : Tensor::zeros(m.b->dtype(), {m.b->dim(1)}));
    }
    const std::string base = first.outputs[0] + "_merged";
    Node mm;
    mm.op_type = "FusedMatMul";
    mm.domain = kIngotDomain;
    mm.name = fresh_name(g, base);
    const std::string w_name = fresh_name(g, base + "_B");
    g.initializers[w_name] = ops::concat(bs, 1);
    mm.inputs = {first.inputs[0], w_name};
    if (any_bias) {
      const std::string bias_name = fresh_name(g, base + "_bias");
      g.initializers[bias_name] = ops::concat(biases, 0);
      mm.inputs.push_back(bias_name);
    }
    mm.outputs = {mm.name};
    mm.attrs["activation"] = Attribute(activation_of(first));
    mm.attrs["transB"] = Attribute(int64_t(0));
    mm.attrs["alpha"] = Attribute(alpha);
    Node split;
    split.op_type = "Split";
    split.name = fresh_name(g, base + "_split");
    split.inputs = {mm.name};
    split.attrs["axis"] = Attribute(int64_t(-1));
    if (model.opset("") >= 13) {
      const std::string sizes = fresh_name(g, base + "_sizes");
      g.initializers[sizes] = Tensor::from_vector<int64_t>(widths, {int64_t(widths.size())});
      split.inputs.push_back(sizes);
    } else {
      split.attrs["split"] = Attribute(widths);
    }
    for (const Member& m : members) {
      split.outputs.push_back(g.nodes[m.index].outputs[0]);
      removed[m.index] = true;
    }
    model.opsets[kIngotDomain] = 1;
    // The merged product and its Split where the first member was: they read A and constants only,
    // and every reader of a member's output comes after that member.
    std::vector<Node>& placed = replacements[members[0].index];
    placed.push_back(std::move(mm));
    placed.push_back(std::move(split));
    changed = true;
  }
  if (changed) replace_nodes(g, removed, replacements);
  return changed;
}

}  // namespace ingot
