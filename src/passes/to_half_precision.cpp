// Reduced precision (SessionOptions::precision): rewrites a float32 model so that it computes in
// float16 or bfloat16, in the spirit of PyTorch's autocast: the compile pipeline's precision step
// (compiler/compile.cpp), after the optimization passes, when the precision is not FP32.
//
// Every node of the main graph gets one of three precisions:
//   half   - convolutions and matrix products (Conv, ConvTranspose, MatMul, Gemm, ai.ingot.FusedConv/FusedMatMul/
//            Attention): always, as autocast's lower-precision list (Attention's softmax runs in
//            float32 inside its kernels);
//   follow - elementwise and data-movement ops (tagged AutocastFollow): half when one of their float32 data
//            inputs is a half activation, else float32 (so shape arithmetic done in float, like
//            Cast(Shape) * scale feeding Resize, keeps full precision);
//            Softmax, LogSoftmax, LayerNormalization (one output) and Erf follow too (Float32Inside):
//            autocast keeps them float32, but Ingot's kernels for them read and write 16-bit values
//            and compute in float32 inside, so half I/O costs no accuracy inside the op and saves
//            a Cast pair around it (on attention score matrices, most of the traffic);
//   float  - everything else, in float32: the rest of autocast's fp32 list (Reduce*, the other
//            normalizations, Exp, Log, Pow, LSTM/GRU/RNN: sums and exponentials that can leave
//            float16's range), Range, random ops, control flow, sequences, custom domains and any
//            op not listed.
// Values carry their dtype through the graph in topological order; a value needed in the other
// precision is converted once, where it is first needed (a Cast node, or a converted copy for
// initializers and Constant nodes; float16 copies saturate at +-65504) and the copy is shared by
// later readers. Float originals that no longer have readers are dropped. Float32 data inputs of
// half nodes become half, except Resize's roi/scales, Upsample's scales and Dropout's ratio.
// Cast(to=float32) of a half value becomes Cast(to=half).
//
// The interface does not change: graph inputs and outputs keep float32 (a Cast after each input
// that a half node reads, a Cast before each output computed in half), and so do values read by
// subgraphs (If/Loop/Scan bodies run in float32, unchanged). Graph::value_info follows the new dtypes
// so the executor's load-time dtype checks see them. Only float32 values are touched; a model's
// own float16/float64 values keep their types.
#include <fmt/format.h>
#include <ingot/error.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ops/semantics/fused_elementwise.h"
#include "ops/op_def.h"
#include "passes/pass.h"

namespace ingot {
namespace {

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// The op catalogue's autocast tags (ops/op_def.h) decide: AutocastLowPrecision runs in half,
// AutocastFollow and Float32Inside follow their data input, anything else stays float32.
bool has_tag(const Node& n, OpTag tag) { return OpCatalogue::instance().has_tag(n.domain, n.op_type, tag); }

// ai.ingot.FusedElementwise computes its whole chain in float32 and rounds once at the end; it
// follows unless the chain holds an op autocast keeps in float32 for range (Exp, Log, Pow).
bool fused_chain_follows(const Node& n) {
  auto it = n.attrs.find("program");
  if (it == n.attrs.end()) return false;
  const auto program = fused::Program::parse(it->second.s, int(n.inputs.size()));
  return std::none_of(program.instrs.begin(), program.instrs.end(), [](const fused::Instr& in) {
    return in.op == fused::Op::Exp || in.op == fused::Op::Log || in.op == fused::Op::Pow;
  });
}

bool follows(const Node& n) {
  if (n.domain == kIngotDomain && n.op_type == "FusedElementwise") return fused_chain_follows(n);
  if (has_tag(n, OpTag::AutocastFollow)) return true;
  if (!has_tag(n, OpTag::Float32Inside)) return false;
  // LayerNormalization's Mean and InvStdDev outputs are float32 (stash_type) whatever X is.
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    if (!n.outputs[i].empty()) return false;
  }
  return true;
}

// Float inputs that keep float32 whatever the node's precision (they are parameters, not data).
bool fp32_input(const Node& n, size_t i) {
  const OpDef* def = OpCatalogue::instance().find(n.domain, n.op_type);
  return def && def->float32_params_from >= 0 && int(i) >= def->float32_params_from;
}

bool has_subgraph(const Node& n) {
  for (const auto& [key, a] : n.attrs) {
    if (a.kind == AttrKind::Graph || a.kind == AttrKind::Graphs) return true;
  }
  return false;
}

// The dtype of an output whose type shape inference did not record (a fallback; most are known):
// the op's schema infers it (OpDef::output_dtype), Undefined when it cannot, and the pass leaves such
// values alone.
DType infer_output_dtype(const Node& n, size_t i, const std::map<std::string, DType>& dtypes) {
  const OpDef* def = OpCatalogue::instance().find(n.domain, n.op_type);
  if (!def) return DType::Undefined;
  std::vector<DType> inputs;
  for (const std::string& in : n.inputs) {
    auto it = in.empty() ? dtypes.end() : dtypes.find(in);
    inputs.push_back(it == dtypes.end() ? DType::Undefined : it->second);
  }
  return def->output_dtype(n.attrs, i, inputs);
}

// A float32 constant: an initializer or a Constant node's value.
std::optional<Tensor> constant_value(const Node& n) {
  if (n.op_type != "Constant" || !is_default_domain(n.domain) || n.outputs.size() != 1) return std::nullopt;
  if (auto it = n.attrs.find("value");
      it != n.attrs.end() && it->second.kind == AttrKind::Tensor && it->second.t.dtype() == DType::Float32)
    return it->second.t;
  if (auto it = n.attrs.find("value_float"); it != n.attrs.end()) return Tensor::scalar<float>(it->second.f);
  if (auto it = n.attrs.find("value_floats"); it != n.attrs.end()) {
    const auto& v = it->second.floats;
    return Tensor::from_vector<float>(v, {int64_t(v.size())});
  }
  return std::nullopt;
}

class Converter {
 public:
  Converter(Graph& g, DType half) : g_(g), half_(half), suffix_(half == DType::Float16 ? "_fp16" : "_bf16") {}

  void run() {
    collect_names();
    collect_dtypes();
    for (const ValueInfo& out : g_.outputs) keep_float_name_.insert(out.name);
    std::set<std::string> nested;
    for (const Node& n : g_.nodes) {
      if (!has_subgraph(n)) continue;
      for (const auto& [key, a] : n.attrs) {
        if (a.g) collect_reads(*a.g, nested);
        for (const auto& sub : a.graphs) collect_reads(*sub, nested);
      }
    }
    keep_float_name_.insert(nested.begin(), nested.end());
    for (const auto& [name, t] : g_.initializers) {
      if (t.dtype() == DType::Float32) constants_.emplace(name, t);
    }
    for (const Node& n : g_.nodes) {
      if (auto c = constant_value(n)) constants_.emplace(n.outputs[0], *c);
    }
    for (Node& n : g_.nodes) convert(std::move(n));
    drop_dead_constants(nested);
    g_.nodes = std::move(out_);
  }

  bool changed() const { return changed_; }

 private:
  Graph& g_;
  DType half_;
  std::string suffix_;
  std::map<std::string, DType> dtypes_;                        // original dtype of every value whose type is known
  std::map<std::string, DType> natural_;                       // float32 values: the precision they are computed in
  std::map<std::string, std::string> half_name_, float_name_;  // the value in each precision, once made
  std::map<std::string, Tensor> constants_;                    // float32 initializers and Constant values
  std::set<std::string> keep_float_name_;                      // graph outputs and values read by subgraphs
  std::set<std::string> names_;                                // every name in use, subgraphs included
  std::vector<Node> out_;
  bool changed_ = false;

  static void collect_reads(const Graph& g, std::set<std::string>& names) {
    g.for_each_graph([&](const Graph& sg, int) {
      for (const Node& n : sg.nodes) names.insert(n.inputs.begin(), n.inputs.end());
      for (const ValueInfo& o : sg.outputs) names.insert(o.name);
    });
  }

  void collect_names() {
    g_.for_each_graph([&](const Graph& sg, int) {
      for (const auto& v : sg.inputs) names_.insert(v.name);
      for (const auto& v : sg.outputs) names_.insert(v.name);
      for (const auto& [name, vi] : sg.value_info) names_.insert(name);
      for (const auto& [name, t] : sg.initializers) names_.insert(name);
      for (const Node& n : sg.nodes) {
        names_.insert(n.name);
        names_.insert(n.inputs.begin(), n.inputs.end());
        names_.insert(n.outputs.begin(), n.outputs.end());
      }
    });
  }

  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int i = 1; names_.count(name); ++i) name = fmt::format("{}_{}", base, i);
    names_.insert(name);
    return name;
  }

  void collect_dtypes() {
    auto record = [&](const ValueInfo& vi) {
      dtypes_[vi.name] = vi.type.kind == ValueKind::Tensor ? vi.type.dtype : DType::Undefined;
    };
    for (const auto& vi : g_.inputs) record(vi);
    for (const auto& [name, vi] : g_.value_info) record(vi);
    for (const auto& vi : g_.outputs) record(vi);
    for (const auto& [name, t] : g_.initializers) dtypes_[name] = t.dtype();
    for (const Node& n : g_.nodes) {
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        const std::string& o = n.outputs[i];
        if (o.empty()) continue;
        auto it = dtypes_.find(o);
        if (it == dtypes_.end()) {
          dtypes_[o] = infer_output_dtype(n, i, dtypes_);
        } else if (it->second == DType::Undefined && !non_tensor(o)) {
          it->second = infer_output_dtype(n, i, dtypes_);
        }
      }
    }
  }

  bool non_tensor(const std::string& name) const {
    const ValueInfo* vi = g_.find_value_info(name);
    return vi && vi->type.kind != ValueKind::Tensor;
  }

  bool is_float32(const std::string& v) const {
    auto it = dtypes_.find(v);
    return !v.empty() && it != dtypes_.end() && it->second == DType::Float32;
  }

  DType natural(const std::string& v) const {
    auto it = natural_.find(v);
    return it == natural_.end() ? DType::Float32 : it->second;
  }

  // The static type of `like` with another dtype, for a new value's value_info.
  ValueInfo info_like(const std::string& like, const std::string& name, DType dtype) const {
    ValueInfo vi{name, {}};
    if (const ValueInfo* src = g_.find_value_info(like)) vi.type = src->type;
    if (auto it = g_.initializers.find(like); it != g_.initializers.end()) {
      std::vector<Dim> dims;
      for (int64_t d : it->second.shape()) dims.push_back(Dim{d, {}});
      vi.type.shape = dims;
    }
    vi.type.kind = ValueKind::Tensor;
    vi.type.dtype = dtype;
    return vi;
  }

  void set_dtype(const std::string& name, DType dtype) {
    auto it = g_.value_info.find(name);
    if (it != g_.value_info.end()) {
      it->second.type.dtype = dtype;
    } else {
      g_.value_info[name] = info_like(name, name, dtype);
    }
  }

  Tensor convert_constant(const Tensor& t) const {
    if (half_ != DType::Float16) return t.cast(half_);
    // float16 saturates: keep finite values finite (+-65504), as onnxconverter-common does.
    Tensor clamped = Tensor::empty(DType::Float32, t.shape());
    const float* src = t.data<float>();
    float* dst = clamped.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      float x = src[i];
      dst[i] = std::isfinite(x) ? std::clamp(x, -65504.0f, 65504.0f) : x;
    }
    return clamped.cast(half_);
  }

  void add_cast(const std::string& from, const std::string& to, DType dtype) {
    Node cast;
    cast.name = fresh(to + "_cast");
    cast.op_type = "Cast";
    cast.inputs = {from};
    cast.outputs = {to};
    cast.attrs["to"] = int64_t(dtype);
    out_.push_back(std::move(cast));
    changed_ = true;
  }

  // The float32 value v in precision `dtype`, converted (once) where first needed.
  std::string as(const std::string& v, DType dtype) {
    auto& cache = dtype == DType::Float32 ? float_name_ : half_name_;
    if (auto it = cache.find(v); it != cache.end()) return it->second;
    if (dtype == natural(v)) {  // an input, initializer or float node output under its own name
      cache[v] = v;
      return v;
    }
    const std::string& source = dtype == DType::Float32 ? half_name_.at(v) : as(v, DType::Float32);
    std::string name = fresh(v + (dtype == DType::Float32 ? std::string("_fp32") : suffix_));
    if (auto c = constants_.find(v); c != constants_.end() && dtype == half_) {
      g_.initializers[name] = convert_constant(c->second);
      changed_ = true;
    } else {
      add_cast(source, name, dtype);
      g_.value_info[name] = info_like(v, name, dtype);
    }
    cache[v] = name;
    return name;
  }

  void convert(Node n) {
    bool half = false;
    const bool default_domain = is_default_domain(n.domain);
    auto data_input_is_half = [&] {
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (is_float32(n.inputs[i]) && !fp32_input(n, i) && natural(n.inputs[i]) == half_) return true;
      }
      return false;
    };
    if (has_subgraph(n)) {
      half = false;
    } else if (has_tag(n, OpTag::AutocastLowPrecision)) {
      half = true;
    } else if (default_domain && n.op_type == "Cast") {
      // Cast(to=float32) of a half activation stays in half; other Casts read their input as it is.
      auto to = n.attrs.find("to");
      const std::string& x = n.inputs.empty() ? std::string() : n.inputs[0];
      if (is_float32(x) && natural(x) == half_) {
        if (to != n.attrs.end() && DType(to->second.i) == DType::Float32) {
          to->second.i = int64_t(half_);
          half = true;
          changed_ = true;
        } else {
          n.inputs[0] = as(x, half_);
          emit(std::move(n), false);
          return;
        }
      }
    } else if ((default_domain || n.domain == kIngotDomain) && follows(n)) {
      half = data_input_is_half();
    }
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!is_float32(n.inputs[i])) continue;
      n.inputs[i] = as(n.inputs[i], half && !fp32_input(n, i) ? half_ : DType::Float32);
    }
    emit(std::move(n), half);
  }

  void emit(Node n, bool half) {
    if (!half) {
      for (const auto& o : n.outputs) {
        if (is_float32(o)) natural_[o] = DType::Float32;
      }
      out_.push_back(std::move(n));
      return;
    }
    std::vector<std::pair<std::string, std::string>> casts_back;  // (half name, float name)
    for (auto& o : n.outputs) {
      if (!is_float32(o)) continue;
      changed_ = true;
      natural_[o] = half_;
      if (keep_float_name_.count(o)) {
        std::string h = fresh(o + suffix_);
        g_.value_info[h] = info_like(o, h, half_);
        half_name_[o] = h;
        float_name_[o] = o;
        casts_back.emplace_back(h, o);
        o = h;
      } else {
        half_name_[o] = o;
        set_dtype(o, half_);
      }
    }
    out_.push_back(std::move(n));
    for (const auto& [h, f] : casts_back) add_cast(h, f, DType::Float32);
  }

  // Float32 constants whose readers all took the converted copy.
  void drop_dead_constants(const std::set<std::string>& nested_reads) {
    std::set<std::string> read(nested_reads);
    for (const Node& n : out_) read.insert(n.inputs.begin(), n.inputs.end());
    for (const ValueInfo& o : g_.outputs) read.insert(o.name);
    std::set<std::string> dead;
    for (const auto& [v, h] : half_name_) {
      if (constants_.count(v) && h != v && !read.count(v)) dead.insert(v);
    }
    for (const auto& v : dead) g_.initializers.erase(v);
    std::erase_if(out_, [&](const Node& n) {
      return n.op_type == "Constant" && n.outputs.size() == 1 && dead.count(n.outputs[0]);
    });
    for (const auto& v : dead) g_.value_info.erase(v);
  }
};

}  // namespace

bool to_half_precision(Model& model, DType dtype) {
  if (dtype != DType::Float16 && dtype != DType::BFloat16)
    fail("reduced precision: expected float16 or bfloat16, got {}", dtype_name(dtype));
  Converter c(*model.graph, dtype);
  c.run();
  return c.changed();
}

}  // namespace ingot
