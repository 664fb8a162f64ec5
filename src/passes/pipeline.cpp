// The optimization passes, in the order they run (compiler/compile.cpp puts them between the
// lowerings and the precision and layout steps).
#include <map>
#include <set>
#include <string>

#include "core/flags.h"
#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {

namespace {
// QDQ folding before constant folding, which would otherwise turn the int8 weights'
// DequantizeLinear into float weights. Shape simplification next (static dims picked out of partially symbolic shapes become constants
// that constant folding then propagates), folding next (it exposes constant weights and shapes to the rest), then the no-op removal that
// lets patterns match across Identity/Dropout, BatchNormalization folding before the Conv fusion (so
// Conv -> BN -> Relu becomes one FusedConv), the pattern fusions that rewrite elementary ops into
// the ops they spell out (layer normalization, hard-swish, softmax, then attention, which needs the
// Softmax op: before the MatMul fusion takes the score MatMul's scale), the merge of small sibling
// products for CUDA targets (after the MatMul fusion: it merges fused products), the kernel fusions (elementwise chains after the
// Conv/MatMul epilogues have taken their bias and activation), and dead code last
// to drop what the others orphaned. The pattern and kernel fusions that name nothing new also run
// inside If/Loop/Scan bodies (Pass::in_bodies); folding already recurses by itself.
constexpr Pass kPipeline[] = {
    {"simplify-shapes", simplify_shapes},
    {"fuse-qdq", fuse_qdq},
    {"constant-folding", constant_folding},
    {"remove-identity", remove_identity},
    {"fold-batchnorm", fold_batchnorm},
    {"fold-scale-shift", fold_scale_shift},
    {"fuse-layer-norm", fuse_layer_norm, true},
    {"fuse-hard-swish", fuse_hard_swish, true},
    {"fuse-softmax", fuse_softmax, true},
    {"fuse-attention", fuse_attention},
    {"fuse-conv-add-relu", fuse_conv_add_relu, true},
    {"fuse-matmul-bias-act", fuse_matmul_bias_act, true},
    {"merge-sibling-matmuls", merge_sibling_matmuls, false, true},
    {"fuse-elementwise", fuse_elementwise, true},
    {"fuse-quantized-epilogue", fuse_quantized_epilogue},
    {"dead-code", dead_code},
};
constexpr Pass kLowering[] = {
    {"lower-gradient", lower_gradient},
};
}  // namespace

std::span<const Pass> pipeline_passes() { return kPipeline; }
std::span<const Pass> lowering_passes() { return kLowering; }

// INGOT_DISABLE_PASSES=name,name: passes to skip (A/B measurements of one pass, bisecting a pass
// that breaks a model).
bool pass_disabled(std::string_view pass) { return flags::list_contains("INGOT_DISABLE_PASSES", pass); }

namespace {

// Types of the values a graph defines or declares (inputs, outputs, value_info, initializers).
using Scope = std::map<std::string, ValueType>;
void add_types(const Graph& g, Scope& scope) {
  for (const ValueInfo& v : g.inputs) scope[v.name] = v.type;
  for (const ValueInfo& v : g.outputs) scope[v.name] = v.type;
  for (const auto& [name, v] : g.value_info) scope[name] = v.type;
  for (const auto& [name, t] : g.initializers) {
    if (auto type = passes::value_type(g, name)) scope[name] = *type;
  }
}

// Runs `pass` on every body nested in `g` (a body's own bodies too), each as the main graph of a
// model with `model`'s opsets; opsets the pass adds (ai.ingot) are kept. While the pass runs, the
// types of the enclosing values a body reads are in its value_info (a chain whose input comes from
// the main graph has that input's dtype), and are taken out again afterwards.
bool run_in_bodies(const Pass& pass, Model& model, Graph& g, const Scope& enclosing) {
  Scope scope = enclosing;
  add_types(g, scope);
  bool changed = false;
  auto visit = [&](const std::shared_ptr<Graph>& body) {
    if (!body) return;
    std::set<std::string> defined;
    for (const ValueInfo& v : body->inputs) defined.insert(v.name);
    for (const auto& [name, t] : body->initializers) defined.insert(name);
    for (const Node& n : body->nodes) defined.insert(n.outputs.begin(), n.outputs.end());
    std::set<std::string> reads;
    passes::collect_graph_reads(*body, reads);
    std::vector<std::string> borrowed;
    for (const std::string& name : reads) {
      auto it = scope.find(name);
      if (defined.count(name) || body->value_info.count(name) || it == scope.end()) continue;
      body->value_info[name] = ValueInfo{name, it->second};
      borrowed.push_back(name);
    }
    Model view{model.name, body, model.opsets, model.ir_version, model.producer};
    changed |= pass.run(view);
    model.opsets = view.opsets;
    for (const std::string& name : borrowed) body->value_info.erase(name);
    changed |= run_in_bodies(pass, model, *body, scope);
  };
  for (Node& n : g.nodes) {
    for (auto& [key, attr] : n.attrs) {
      if (attr.kind == AttrKind::Graph) visit(attr.g);
      if (attr.kind == AttrKind::Graphs) {
        for (const auto& sub : attr.graphs) visit(sub);
      }
    }
  }
  return changed;
}

}  // namespace

bool run_pass(const Pass& pass, Model& model) {
  bool changed = pass.run(model);
  if (pass.in_bodies) changed |= run_in_bodies(pass, model, *model.graph, {});
  return changed;
}

}  // namespace ingot
