// Elementwise-chain fusion: a connected group of elementwise float ops whose intermediate values
// nothing outside the group reads becomes one ai.ingot.FusedElementwise node, whose `program`
// (ops/semantics/fused_elementwise.h) evaluates the group per output element. GELU written out
// (Div, Erf, Add, Mul, Mul), swish (x * Sigmoid(x)), bias + activation chains after ops without an
// epilogue, and the gate arithmetic of written-out RNN cells each become one kernel: one read of the
// inputs and one write instead of a tensor per op.
//
// Grouping: nodes are visited last to first; an unvisited fusible node roots a group, which then
// absorbs the producers of its members' inputs while every reader of such a producer's output is
// already a member (so no intermediate escapes, and the group is convex: nothing outside can sit
// between two members) and the producer's output has the root's shape (a smaller value, broadcast
// into the chain, is computed once on its own rather than once per output element). Groups of one
// node stay as they are. Fusible: the ops below with one
// output, every input and the output of one float dtype (float32, float16, bfloat16), Clip with
// constant bounds. Scalar float initializers become immediates of the program; other operands
// are inputs of the fused node (broadcast numpy-style, as the ops did).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "ops/semantics/fused_elementwise.h"
#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;
using fused::Instr;
using fused::Op;
using fused::Operand;


bool is_fusible_dtype(DType dt) { return dt == DType::Float32 || dt == DType::Float16 || dt == DType::BFloat16; }

// ONNX ops with a one-instruction meaning.
std::optional<Op> simple_op(const Node& n) {
  static const std::map<std::string, Op> ops = {
      {"Neg", Op::Neg},           {"Abs", Op::Abs},         {"Exp", Op::Exp},       {"Log", Op::Log},
      {"Sqrt", Op::Sqrt},         {"Reciprocal", Op::Reciprocal}, {"Sigmoid", Op::Sigmoid}, {"Tanh", Op::Tanh},
      {"Relu", Op::Relu},         {"Erf", Op::Erf},         {"Floor", Op::Floor},   {"Ceil", Op::Ceil},
      {"Sin", Op::Sin},           {"Cos", Op::Cos},         {"Softplus", Op::Softplus}, {"HardSwish", Op::HardSwish},
      {"Add", Op::Add},           {"Sub", Op::Sub},         {"Mul", Op::Mul},       {"Div", Op::Div},
      {"Pow", Op::Pow},           {"Max", Op::Max},         {"Min", Op::Min},
  };
  const bool ingot_hard_swish = n.domain == kIngotDomain && n.op_type == "HardSwish";
  if (!is_default_domain(n.domain) && !ingot_hard_swish) return std::nullopt;
  auto it = ops.find(n.op_type);
  if (it == ops.end()) return std::nullopt;
  const int want = fused::arity(it->second);
  if (int(n.inputs.size()) != want) return std::nullopt;  // variadic Max/Min of other counts
  return it->second;
}

class Fuser {
 public:
  explicit Fuser(Model& model) : model_(model), g_(*model.graph), readers_(g_), producers_(producers(g_)) {}

  bool run() {
    std::vector<int> group_of(g_.nodes.size(), -1);
    std::vector<std::vector<size_t>> groups;
    for (size_t root = g_.nodes.size(); root-- > 0;) {
      if (group_of[root] != -1 || !fusible(root)) continue;
      const int gid = int(groups.size());
      std::vector<size_t> members = {root};
      group_of[root] = gid;
      for (bool grew = true; grew;) {
        grew = false;
        for (size_t m = 0; m < members.size(); ++m) {
          for (const std::string& in : g_.nodes[members[m]].inputs) {
            auto p = producers_.find(in);
            if (p == producers_.end() || group_of[p->second] != -1 || !fusible(p->second)) continue;
            if (!all_readers_in(in, group_of, gid) || broadcast_into(in, g_.nodes[root].outputs[0])) continue;
            group_of[p->second] = gid;
            members.push_back(p->second);
            grew = true;
          }
        }
      }
      groups.push_back(std::move(members));
    }
    std::vector<bool> removed(g_.nodes.size(), false);
    std::map<size_t, Node> replacements;
    for (auto& members : groups) {
      if (members.size() < 2) continue;
      std::sort(members.begin(), members.end());  // node order is a topological order
      std::optional<Node> fused_node = build(members);
      if (!fused_node) continue;
      for (size_t m : members) removed[m] = true;
      replacements.emplace(members.back(), std::move(*fused_node));
    }
    if (replacements.empty()) return false;
    replace_nodes(g_, removed, replacements);
    model_.opsets[kIngotDomain] = std::max<int64_t>(model_.opsets[kIngotDomain], 1);
    return true;
  }

 private:
  bool all_readers_in(const std::string& value, const std::vector<int>& group_of, int gid) const {
    if (is_graph_output(g_, value)) return false;
    auto it = readers_.of.find(value);
    if (it == readers_.of.end()) return false;
    return std::all_of(it->second.begin(), it->second.end(),
                       [&](size_t r) { return r != SIZE_MAX && group_of[r] == gid; });
  }

  // Whether `value` is known to be smaller than `output` (broadcast into it). Such a producer stays
  // out of the group: fused, it would be recomputed for every output element (a squeeze-excite
  // gate of [N, C, 1, 1] for each of N*C*H*W products) instead of once per element of its own.
  bool broadcast_into(const std::string& value, const std::string& output) const {
    auto a = value_type(g_, value), b = value_type(g_, output);
    if (!a || !b || !a->shape || !b->shape) return false;
    return *a->shape != *b->shape;
  }

  // A scalar float constant of node n usable as an immediate: its rank is at most that of another
  // operand of n, so leaving it out of the broadcast cannot change the output's shape ([1, 1] + [3]
  // is [1, 3]).
  std::optional<float> immediate(const std::string& value, const Node& n) const {
    auto v = scalar_constant(g_, value);
    if (!v) return std::nullopt;
    const size_t rank = size_t(constant_initializer(g_, value)->rank());
    const bool kept = rank == 0 || std::any_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& other) {
                        if (other.empty() || other == value) return false;
                        auto t = value_type(g_, other);
                        return t && t->shape && t->shape->size() >= rank;
                      });
    if (!kept) return std::nullopt;
    return float(*v);
  }

  bool fusible(size_t i) const {
    const Node& n = g_.nodes[i];
    if (n.outputs.size() != 1 || n.outputs[0].empty() || has_subgraph(n)) return false;
    const DType dt = value_dtype(g_, n.outputs[0]);
    if (!is_fusible_dtype(dt)) return false;
    if (is_op(n, "Clip")) {
      if (n.inputs.empty() || value_dtype(g_, n.inputs[0]) != dt) return false;
      for (size_t k = 1; k < n.inputs.size(); ++k) {
        if (!n.inputs[k].empty() && !immediate(n.inputs[k], n)) return false;
      }
      return true;
    }
    if (!is_op(n, "HardSigmoid") && !is_op(n, "LeakyRelu") && !simple_op(n)) return false;
    if (n.inputs.empty()) return false;
    return std::all_of(n.inputs.begin(), n.inputs.end(),
                       [&](const std::string& in) { return !in.empty() && value_dtype(g_, in) == dt; });
  }

  // The fused node for a group (members in topological order), or nullopt over the limits.
  std::optional<Node> build(const std::vector<size_t>& members) {
    fused::Program program;
    std::vector<std::string> inputs;
    std::map<std::string, Operand> known;  // values computed inside the group
    const Node& last = g_.nodes[members.back()];
    auto operand = [&](const std::string& value, const Node& n) -> Operand {
      if (auto it = known.find(value); it != known.end()) return it->second;
      if (auto c = immediate(value, n)) return Operand::constant(*c);
      auto it = std::find(inputs.begin(), inputs.end(), value);
      if (it == inputs.end()) it = inputs.insert(inputs.end(), value);
      return Operand::input(int(it - inputs.begin()));
    };
    auto emit = [&](Op op, Operand a, Operand b = {}) {
      program.instrs.push_back(Instr{op, a, b});
      return Operand::temp(int(program.instrs.size()) - 1);
    };
    for (size_t m : members) {
      const Node& n = g_.nodes[m];
      const std::string& out = n.outputs[0];
      Operand x = operand(n.inputs[0], n), result;
      if (is_op(n, "Clip")) {
        result = x;
        std::optional<float> lo, hi;
        if (model_.opset("") < 11) {
          lo = attr_float(n, "min", -std::numeric_limits<float>::infinity());
          hi = attr_float(n, "max", std::numeric_limits<float>::infinity());
        } else {
          if (n.inputs.size() > 1 && !n.inputs[1].empty()) lo = immediate(n.inputs[1], n);
          if (n.inputs.size() > 2 && !n.inputs[2].empty()) hi = immediate(n.inputs[2], n);
        }
        if (lo) result = emit(Op::Max, result, Operand::constant(*lo));
        if (hi) result = emit(Op::Min, result, Operand::constant(*hi));
        if (!lo && !hi) result = emit(Op::Max, result, Operand::constant(-std::numeric_limits<float>::infinity()));
      } else if (is_op(n, "HardSigmoid")) {  // max(0, min(1, alpha * x + beta))
        result = emit(Op::Mul, x, Operand::constant(attr_float(n, "alpha", 0.2f)));
        result = emit(Op::Add, result, Operand::constant(attr_float(n, "beta", 0.5f)));
        result = emit(Op::Max, result, Operand::constant(0.0f));
        result = emit(Op::Min, result, Operand::constant(1.0f));
      } else if (is_op(n, "LeakyRelu")) {
        result = emit(Op::LeakyRelu, x, Operand::constant(attr_float(n, "alpha", 0.01f)));
      } else {
        const Op op = *simple_op(n);
        if (fused::arity(op) == 1) {
          result = emit(op, x);
        } else {
          const Operand y = operand(n.inputs[1], n);
          const bool times_one = (op == Op::Mul || op == Op::Div) && y.kind == Operand::Kind::Const && y.value == 1.0f;
          const bool one_times = op == Op::Mul && x.kind == Operand::Kind::Const && x.value == 1.0f;
          // x * 1 and x / 1 are x exactly (NaN and -0 included): no instruction.
          result = times_one ? x : one_times ? y : emit(op, x, y);
        }
      }
      known[out] = result;
    }
    // The output must be the last instruction's result (not an operand passed through by x * 1).
    const Operand& result = known.at(last.outputs[0]);
    if (result.kind != Operand::Kind::Temp || result.index + 1 != int(program.instrs.size())) return std::nullopt;
    if (int(program.instrs.size()) > fused::kMaxInstrs || int(inputs.size()) > fused::kMaxInputs || inputs.empty())
      return std::nullopt;
    program.num_inputs = int(inputs.size());
    Node node;
    node.name = last.name.empty() ? last.outputs[0] : last.name;
    node.op_type = "FusedElementwise";
    node.domain = kIngotDomain;
    node.inputs = std::move(inputs);
    node.outputs = last.outputs;
    node.attrs["program"] = Attribute(program.str());
    return node;
  }

  Model& model_;
  Graph& g_;
  const Readers readers_;
  const std::map<std::string, size_t> producers_;
};

}  // namespace

bool fuse_elementwise(Model& model) { return Fuser(model).run(); }

}  // namespace ingot
