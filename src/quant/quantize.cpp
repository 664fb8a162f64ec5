#include "quant/quantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "compiler/compile.h"
#include "core/npy.h"
#include "core/strings.h"
#include "onnx/onnx_export.h"
#include "onnx/onnx_import.h"
#include "passes/pass.h"
#include "passes/pass_util.h"
#include "quant/calibration.h"
#include "runtime/executor.h"

namespace ingot {
namespace quant {

namespace fs = std::filesystem;
using passes::constant_initializer;
using passes::is_op;

// ---- calibration inputs ------------------------------------------------------------------------

namespace {

std::string expected_shape(const ValueInfo& in) {
  if (!in.type.shape) return "any shape";
  return "[" + join(*in.type.shape, ",", [](const Dim& d) { return d.str(); }) + "]";
}

// The samples one .npy file gives for input `in`: one, or a batch split on axis 0 when the input's
// batch dim is fixed at 1; a sample without the batch axis gets it.
std::vector<Tensor> samples_of_file(const fs::path& file, const ValueInfo& in) {
  Tensor t;
  try {
    t = load_npy(file.string());
  } catch (Error& e) {
    e.add_context(fmt::format("calibration file '{}'", file.string()));
    throw;
  }
  const DType want = in.type.dtype == DType::Undefined ? DType::Float32 : in.type.dtype;
  if (t.dtype() != want) {
    fail("calibration file '{}': dtype {}, but input '{}' takes {}", file.string(), dtype_name(t.dtype()), in.name,
         dtype_name(want));
  }
  if (!in.type.shape) return {t};
  const auto& dims = *in.type.shape;
  const bool batch_of_one = !dims.empty() && dims[0].is_static() && dims[0].value == 1;
  if (batch_of_one && size_t(t.rank()) + 1 == dims.size()) {
    Shape s = t.shape();
    s.insert(s.begin(), 1);
    t = t.reshape(s);
  }
  auto fits = [&](const Tensor& x) {
    if (size_t(x.rank()) != dims.size()) return false;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d].is_static() && dims[d].value != x.dim(int64_t(d))) return false;
    }
    return true;
  };
  std::vector<Tensor> out;
  if (batch_of_one && size_t(t.rank()) == dims.size() && t.dim(0) > 1) {
    for (int64_t i = 0; i < t.dim(0); ++i) out.push_back(t.slice_rows(i, i + 1));
  } else {
    out.push_back(t);
  }
  if (!fits(out[0])) {
    fail("calibration file '{}': shape {} does not fit input '{}' {}", file.string(), shape_str(t.shape()), in.name,
         expected_shape(in));
  }
  return out;
}

std::vector<fs::path> npy_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".npy") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::vector<Sample> load_calibration(const Model& model, const std::vector<std::string>& paths) {
  const auto& inputs = model.graph->inputs;
  if (paths.empty()) fail("int8 quantization needs calibration inputs (--calib FILE.npy|DIR; --dynamic needs none)");
  if (inputs.empty()) fail("model '{}' has no inputs to calibrate", model.name);
  std::vector<Sample> samples;
  for (const std::string& p : paths) {
    const fs::path path(p);
    if (!fs::exists(path)) fail("calibration input '{}' does not exist", p);
    if (inputs.size() == 1) {
      std::vector<fs::path> files = fs::is_directory(path) ? npy_files(path) : std::vector<fs::path>{path};
      if (files.empty()) fail("calibration folder '{}' holds no .npy files", p);
      for (const fs::path& f : files) {
        for (Tensor& t : samples_of_file(f, inputs[0])) samples.push_back({t});
      }
      continue;
    }
    // Several inputs: a folder per sample with <input>.npy each, or folders of such folders.
    std::string names = join(inputs, ", ", [](const ValueInfo& v) { return v.name; });
    if (!fs::is_directory(path)) {
      fail("calibration input '{}': the model has {} inputs ({}): give folders holding <input name>.npy for each", p,
           inputs.size(), names);
    }
    std::vector<fs::path> dirs;
    if (fs::exists(path / (inputs[0].name + ".npy"))) {
      dirs.push_back(path);
    } else {
      for (const auto& e : fs::directory_iterator(path))
        if (e.is_directory()) dirs.push_back(e.path());
      std::sort(dirs.begin(), dirs.end());
    }
    if (dirs.empty()) fail("calibration folder '{}' holds no sample folders (each with {}.npy, ...)", p, inputs[0].name);
    for (const fs::path& dir : dirs) {
      Sample s;
      for (const ValueInfo& in : inputs) {
        const fs::path f = dir / (in.name + ".npy");
        if (!fs::exists(f)) fail("calibration sample '{}' has no {}.npy (inputs: {})", dir.string(), in.name, names);
        std::vector<Tensor> ts = samples_of_file(f, in);
        if (ts.size() != 1) fail("calibration file '{}': one sample per file when the model has several inputs", f.string());
        s.push_back(ts[0]);
      }
      samples.push_back(std::move(s));
    }
  }
  return samples;
}

// ---- import ------------------------------------------------------------------------------------

std::shared_ptr<Model> import_for_quantization(const std::string& path, const QuantizeSettings& settings,
                                               QuantizeReport& report, bool onnx_output) {
  std::string note;
  std::shared_ptr<Model> model = import_onnx(path, settings.per_channel ? 13 : settings.dynamic ? 11 : 10, note);
  if (settings.per_channel && model->opset("") < 13 && !onnx_output) {
    // A package: per-channel weights below opset 13 are Ingot's own reading of DequantizeLinear.
    if (model->opset("") < 10) model = import_onnx(path, 12, note);
  } else if (settings.per_channel && model->opset("") < 13) {
    // The converter could not reach 13 (a Softmax of unknown rank, say): per-tensor weights at 10+.
    std::string why = note;
    if (model->opset("") < 10) model = import_onnx(path, 12, note);
    report.notes.push_back(fmt::format("weights per tensor: per-channel scales need opset 13 ({})", why));
  }
  if (!note.empty() && model->opset("") >= 10) report.notes.push_back(note);
  if (model->opset("") < (settings.dynamic ? 11 : 10)) {
    fail("model '{}': opset {} has no {} and ONNX's version converter could not raise it ({})", model->name,
         model->opset(""), settings.dynamic ? "DynamicQuantizeLinear (opset 11)" : "QuantizeLinear (opset 10)", note);
  }
  fix_input_shapes(*model, settings.input_shapes);
  return model;
}

// ---- the QDQ rewrite ---------------------------------------------------------------------------

namespace {

// The preparation passes: what makes a float model's products and their epilogues visible.
void prepare(Model& model) {
  static const std::set<std::string_view> wanted{"simplify-shapes", "constant-folding", "remove-identity",
                                                 "fold-batchnorm", "fold-scale-shift", "dead-code"};
  for (const Pass& p : lowering_passes()) run_pass(p, model);
  for (const Pass& p : pipeline_passes()) {
    if (wanted.count(p.name)) run_pass(p, model);
  }
  verify(model);
}

enum class ProductKind { Conv, MatMul, Gemm };

struct Product {
  size_t node;
  ProductKind kind;
  int weight_axis;  // the output-channel axis of the constant weight
};

// Why node `n` is not quantized, or "" when it is a product the integer kernels take.
std::string product_refusal(const Graph& g, const Node& n, ProductKind kind) {
  const Tensor* w = n.inputs.size() > 1 ? constant_initializer(g, n.inputs[1]) : nullptr;
  if (!w || w->dtype() != DType::Float32) return "its weight is not a float32 constant";
  if (passes::value_dtype(g, n.inputs[0]) != DType::Float32) return "its input is not float32";
  if (constant_initializer(g, n.inputs[0])) return "its input is a constant";
  if (kind == ProductKind::Conv) {
    if (w->rank() < 3 || w->rank() > 5) return "not a 1-D to 3-D convolution";
    if (n.inputs.size() > 2 && !n.inputs[2].empty() && !constant_initializer(g, n.inputs[2]))
      return "its bias is not a constant";
    return "";
  }
  if (w->rank() != 2) return "its weight is not 2-D";
  if (kind == ProductKind::Gemm) {
    if (passes::attr_float(n, "alpha", 1.0f) != 1.0f || passes::attr_float(n, "beta", 1.0f) != 1.0f ||
        passes::attr_int(n, "transA", 0) != 0)
      return "Gemm with alpha, beta or transA";
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      const Tensor* c = constant_initializer(g, n.inputs[2]);
      const int64_t cols = passes::attr_int(n, "transB", 0) ? w->dim(0) : w->dim(1);
      if (!c || c->numel() != cols) return "its C is not a constant of N elements";
    }
  }
  return "";
}

// int8 weights, symmetric ([-127, 127]), one scale per slice along `axis` (or one for all when < 0),
// each at least `min_scale` (when given).
std::pair<Tensor, Tensor> quantize_weight(const Tensor& w, int axis, const std::vector<float>& min_scale) {
  const Shape& s = w.shape();
  int64_t outer = 1, channels = 1, inner = 1;
  if (axis >= 0) {
    for (int i = 0; i < int(s.size()); ++i) (i < axis ? outer : i == axis ? channels : inner) *= s[size_t(i)];
  } else {
    inner = w.numel();
  }
  const float* x = w.data<float>();
  std::vector<float> scale(size_t(channels), 0.0f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i)
        scale[size_t(c)] = std::max(scale[size_t(c)], std::abs(x[(o * channels + c) * inner + i]));
  for (size_t c = 0; c < scale.size(); ++c) {
    scale[c] = scale[c] > 0 ? scale[c] / 127.0f : 1.0f;
    if (c < min_scale.size()) scale[c] = std::max(scale[c], min_scale[c]);
  }
  Tensor q = Tensor::empty(DType::Int8, s);
  int8_t* out = q.data<int8_t>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = (o * channels + c) * inner + i;
        out[k] = int8_t(std::clamp(std::nearbyint(x[k] / scale[size_t(c)]), -127.0f, 127.0f));
      }
  Tensor st = axis >= 0 ? Tensor::from_vector(scale, {channels}) : Tensor::from_vector(scale, {});
  return {q, st};
}

class QdqWriter {
 public:
  QdqWriter(Model& model, const QuantizeSettings& settings, QuantizeReport& report, bool onnx_output,
            const std::map<std::string, double>& sensitive)
      : model_(model),
        g_(*model.graph),
        settings_(settings),
        report_(report),
        onnx_output_(onnx_output),
        sensitive_(sensitive) {
    for (const Node& n : g_.nodes) names_.insert(n.outputs.begin(), n.outputs.end());
    for (const auto& [name, t] : g_.initializers) names_.insert(name);
    for (const ValueInfo& v : g_.inputs) names_.insert(v.name);
  }

  // Finds the products and the activations to quantize (with the activation whose range each uses).
  void plan() {
    const auto producer = passes::producers(g_);
    const passes::Readers readers(g_);
    std::set<size_t> residual_adds;  // Adds whose residual a convolution takes
    const bool per_axis = settings_.per_channel && (model_.opset("") >= 13 || !onnx_output_);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      std::optional<ProductKind> kind;
      if (is_op(n, "Conv")) kind = ProductKind::Conv;
      if (is_op(n, "MatMul")) kind = ProductKind::MatMul;
      if (is_op(n, "Gemm")) kind = ProductKind::Gemm;
      if (!kind) continue;
      std::string why = kept_float(n) ? "--keep-float" : product_refusal(g_, n, *kind);
      if (why.empty() && settings_.dynamic && *kind == ProductKind::Conv)
        why = "dynamic quantization takes matrix products only (convolutions: static, with calibration)";
      if (auto it = sensitive_.find(n.outputs[0]); why.empty() && it != sensitive_.end()) {
        why = fmt::format("sensitive: its quantization lowered the cosine similarity of its output by {:.4f} "
                          "(--min-cosine {})",
                          it->second, settings_.min_cosine);
      }
      if (!why.empty()) {
        report_.kept_float.push_back(fmt::format("{}: {}", n.label(), why));
        continue;
      }
      int axis = -1;
      if (per_axis) {
        axis = *kind == ProductKind::Conv ? 0
               : *kind == ProductKind::Gemm && passes::attr_int(n, "transB", 0) ? 0
                                                                              : 1;
      }
      products_.push_back({i, *kind, axis});
      if (settings_.dynamic) {
        dynamic_.insert(n.inputs[0]);
        continue;
      }
      quantize(n.inputs[0]);
      // The residual of Conv -> Add(., r): fused into the integer kernel when r is 8-bit too. Where
      // both addends are convolutions (a downsampling block's main path and shortcut), the first
      // takes the Add and quantizes the other's output; the other's Add is taken, so the first's
      // output stays float and fuse-qdq folds the Add (and the Relu, Q after it) into it.
      if (*kind == ProductKind::Conv) {
        if (auto r = readers.single(n.outputs[0]); r && is_op(g_.nodes[*r], "Add") && g_.nodes[*r].inputs.size() == 2 &&
                                                   residual_adds.insert(*r).second) {
          const Node& add = g_.nodes[*r];
          const std::string& other = add.inputs[0] == n.outputs[0] ? add.inputs[1] : add.inputs[0];
          if (other != n.outputs[0] && passes::same_shape(g_, other, n.outputs[0]) && !constant_initializer(g_, other))
            quantize(other);
        }
      }
    }
    if (settings_.dynamic) return;
    // Ops that commute with quantization run on the 8-bit values when their input and output share
    // one scale (pass_through_ranges), and the means and products with integer kernels take
    // quantized inputs (pointwise_inputs); each may expose more of the other.
    while (pass_through_ranges(producer) | pointwise_inputs(readers)) {
    }
  }

  // Ops that commute with quantization run on the 8-bit values when their input and output share
  // one scale: their input gets the output's quantization, calibrated on the input. So does a
  // Concat of one activation with zero constants (BlazeFace's channel padding): zero is exact.
  // Returns whether a range was added.
  bool pass_through_ranges(const std::map<std::string, size_t>& producer) {
    static const std::set<std::string> pass_through{"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze"};
    auto root = [&](std::string v) {
      for (auto it = range_of_.find(v); it != range_of_.end() && it->second != v; it = range_of_.find(v)) v = it->second;
      return v;
    };
    bool any = false;
    for (bool changed = true; changed; any |= changed) {
      changed = false;
      for (const auto& [value, source] : std::map<std::string, std::string>(range_of_)) {
        auto p = producer.find(value);
        if (p == producer.end()) continue;
        const Node& n = g_.nodes[p->second];
        if (!passes::is_default_domain(n.domain) || n.outputs.size() != 1 || n.inputs.empty()) continue;
        std::string in;
        if (pass_through.count(n.op_type)) {
          in = n.inputs[0];
        } else if (n.op_type == "Concat") {
          for (const std::string& operand : n.inputs) {
            const Tensor* c = constant_initializer(g_, operand);
            if (c && c->dtype() == DType::Float32 && std::all_of(c->data<float>(), c->data<float>() + c->numel(),
                                                                  [](float v) { return v == 0.0f; }))
              continue;
            if (c || !in.empty()) {  // a non-zero constant or a second activation: no shared scale
              in.clear();
              break;
            }
            in = operand;
          }
        }
        if (in.empty() || passes::value_dtype(g_, in) != DType::Float32 || constant_initializer(g_, in)) continue;
        if (!range_of_.count(in)) {
          range_of_[in] = in;
          changed = true;
        }
        const std::string target = root(in);
        if (target != value && source != target) {
          range_of_[value] = target;
          changed = true;
        }
      }
    }
    return any;
  }

  // The means (GlobalAveragePool, ReduceMean) and products of two activations (Mul) whose output is
  // quantized run as integer kernels (fuse-qdq-pointwise: ai.ingot.QuantizedReduceMean /
  // QuantizedMul) when their inputs are quantized too, each with its own range; an input is
  // quantized only where that adds no DequantizeLinear: every node reading it is such an op taking
  // it. A squeeze-excitation block's depthwise output, read by its mean and by its gate's product,
  // is quantized with both or neither (the mean alone would trade its float32 write for a DQ);
  // ResNet-50's last block output, read by the pool alone, is. Returns whether an input was added.
  bool pointwise_inputs(const passes::Readers& readers) {
    auto activation = [&](const std::string& v) {
      return !v.empty() && passes::value_dtype(g_, v) == DType::Float32 && !constant_initializer(g_, v);
    };
    std::set<size_t> ops;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (!passes::is_default_domain(n.domain) || n.outputs.size() != 1 || !range_of_.count(n.outputs[0]) || kept_float(n))
        continue;
      const bool mean = (n.op_type == "GlobalAveragePool" || n.op_type == "ReduceMean") && activation(n.inputs[0]);
      const bool mul = n.op_type == "Mul" && n.inputs.size() == 2 && activation(n.inputs[0]) && activation(n.inputs[1]);
      if (mean || mul) ops.insert(i);
    }
    // Drop the ops one of whose inputs has another reader, until none has.
    auto takes = [&](size_t op) {
      const Node& n = g_.nodes[op];
      const size_t operands = n.op_type == "Mul" ? 2 : 1;
      for (size_t k = 0; k < operands; ++k) {
        if (range_of_.count(n.inputs[k])) continue;
        auto it = readers.of.find(n.inputs[k]);
        if (it == readers.of.end()) return false;
        for (size_t r : it->second) {
          if (!ops.count(r)) return false;
        }
      }
      return true;
    };
    for (bool dropped = true; dropped;) {
      dropped = false;
      for (auto it = ops.begin(); it != ops.end();) {
        if (takes(*it)) {
          ++it;
        } else {
          it = ops.erase(it);
          dropped = true;
        }
      }
    }
    bool any = false;
    for (size_t op : ops) {
      const Node& n = g_.nodes[op];
      for (size_t k = 0; k < (n.op_type == "Mul" ? 2u : 1u); ++k) {
        if (range_of_.count(n.inputs[k])) continue;
        quantize(n.inputs[k]);
        any = true;
      }
    }
    return any;
  }

  // Each quantized product's activation input and output (the float values, in the QDQ model too).
  std::vector<std::pair<std::string, std::string>> product_io() const {
    std::vector<std::pair<std::string, std::string>> io;
    for (const Product& p : products_) io.emplace_back(g_.nodes[p.node].inputs[0], g_.nodes[p.node].outputs[0]);
    return io;
  }

  // The activations whose ranges calibration observes.
  std::vector<std::string> observed() const {
    std::set<std::string> s;
    for (const auto& [value, source] : range_of_) s.insert(source);
    return {s.begin(), s.end()};
  }

  void rewrite(const std::map<std::string, QuantParams>& params) {
    std::map<std::string, std::string> dequantized;  // activation -> its DQ output
    std::map<std::string, std::vector<Node>> after;  // producer output -> Q/DQ nodes to place after it
    std::vector<Node> at_start;
    for (const auto& [value, source] : range_of_) {
      const QuantParams& p = params.at(source);
      const std::string s = add_initializer(value + "_scale", Tensor::from_vector(std::vector<float>{p.scale}, {}));
      Tensor zp = Tensor::zeros(p.dtype, {});
      if (p.dtype == DType::UInt8) zp.data<uint8_t>()[0] = uint8_t(p.zero_point);
      else zp.data<int8_t>()[0] = int8_t(p.zero_point);
      const std::string z = add_initializer(value + "_zero_point", zp);
      const std::string q = fresh(value + "_quantized"), dq = fresh(value + "_dequantized");
      std::vector<Node> pair{node("QuantizeLinear", {value, s, z}, q, {}), node("DequantizeLinear", {q, s, z}, dq, {})};
      if (auto t = passes::value_type(g_, value)) {
        ValueType qt = *t;
        qt.dtype = p.dtype;
        g_.value_info[q] = {q, qt};
        g_.value_info[dq] = {dq, *t};
      }
      dequantized[value] = dq;
      if (passes::is_graph_input(g_, value)) at_start.insert(at_start.end(), pair.begin(), pair.end());
      else after[value] = std::move(pair);
    }
    // Dynamic quantization: DynamicQuantizeLinear -> DequantizeLinear, the activation's uint8 scale and
    // zero point computed per call from its own range.
    for (const std::string& value : dynamic_) {
      const std::string q = fresh(value + "_quantized"), s = fresh(value + "_scale"), z = fresh(value + "_zero_point");
      const std::string dq = fresh(value + "_dequantized");
      Node dql = node("DynamicQuantizeLinear", {value}, q, {});
      dql.outputs = {q, s, z};
      std::vector<Node> pair{dql, node("DequantizeLinear", {q, s, z}, dq, {})};
      if (auto t = passes::value_type(g_, value)) {
        ValueType qt = *t;
        qt.dtype = DType::UInt8;
        g_.value_info[q] = {q, qt};
        g_.value_info[dq] = {dq, *t};
      }
      dequantized[value] = dq;
      if (passes::is_graph_input(g_, value)) at_start.insert(at_start.end(), pair.begin(), pair.end());
      else after[value] = std::move(pair);
    }
    std::vector<Node> nodes(at_start.begin(), at_start.end());
    std::map<size_t, const Product*> product_at;
    for (const Product& p : products_) product_at[p.node] = &p;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      Node n = std::move(g_.nodes[i]);
      const std::string x = n.inputs.empty() ? "" : n.inputs[0];
      for (std::string& in : n.inputs) {
        if (auto it = dequantized.find(in); it != dequantized.end()) in = it->second;
      }
      if (auto it = product_at.find(i); it != product_at.end())
        quantize_parameters(n, *it->second, settings_.dynamic ? std::optional<QuantParams>() : params.at(range_of_.at(x)),
                            nodes);
      std::vector<std::string> outs = n.outputs;
      nodes.push_back(std::move(n));
      for (const std::string& o : outs) {
        if (auto it = after.find(o); it != after.end()) nodes.insert(nodes.end(), it->second.begin(), it->second.end());
      }
    }
    g_.nodes = std::move(nodes);
    report_.quantized = int(products_.size());
  }

 private:
  void quantize(const std::string& value) {
    if (!range_of_.count(value)) range_of_[value] = value;
  }
  bool kept_float(const Node& n) const {
    return std::find_if(settings_.keep_float.begin(), settings_.keep_float.end(), [&](const std::string& k) {
             return k == n.op_type || (!n.name.empty() && k == n.name) || k == n.outputs[0];
           }) != settings_.keep_float.end();
  }

  std::string fresh(const std::string& hint) {
    std::string name = hint;
    for (int i = 1; names_.count(name); ++i) name = hint + "_" + std::to_string(i);
    names_.insert(name);
    return name;
  }
  std::string add_initializer(const std::string& hint, Tensor t) {
    std::string name = fresh(hint);
    g_.initializers[name] = std::move(t);
    return name;
  }
  static Node node(const char* op, std::vector<std::string> inputs, const std::string& out, Attributes attrs) {
    Node n;
    n.name = out;
    n.op_type = op;
    n.inputs = std::move(inputs);
    n.outputs = {out};
    n.attrs = std::move(attrs);
    return n;
  }

  // The product's weight (and bias) become int8 (int32) initializers behind DequantizeLinear.
  // `x`: the activation's quantization (none for dynamic quantization, whose bias stays float32).
  void quantize_parameters(Node& n, const Product& p, const std::optional<QuantParams>& xq, std::vector<Node>& nodes) {
    const Tensor& w = *constant_initializer(g_, n.inputs[1]);
    const bool has_bias = xq && p.kind != ProductKind::MatMul && n.inputs.size() > 2 && !n.inputs[2].empty();
    const QuantParams x = xq.value_or(QuantParams{});
    const Tensor* b = has_bias ? constant_initializer(g_, n.inputs[2]) : nullptr;
    // A channel whose weights are tiny next to its bias (a BatchNormalization fold of a dead channel)
    // gets a coarser weight scale, so that its bias fits int32 in x_scale * w_scale units.
    std::vector<float> min_scale;
    if (b) {
      constexpr double kInt32 = 2147483647.0 / 2;  // headroom for the accumulation
      for (int64_t c = 0; c < b->numel(); ++c) min_scale.push_back(float(std::abs(b->item_double(c)) / (x.scale * kInt32)));
      if (p.weight_axis < 0) min_scale = {*std::max_element(min_scale.begin(), min_scale.end())};
    }
    auto [wq, ws] = quantize_weight(w, p.weight_axis, min_scale);
    const std::string base = n.outputs[0];
    const std::string ws_name = add_initializer(base + "_weight_scale", ws);
    Attributes axis;
    if (p.weight_axis >= 0) axis["axis"] = Attribute(int64_t(p.weight_axis));
    n.inputs[1] = dequantize(base + "_weight", wq, ws_name, Tensor::zeros(DType::Int8, ws.shape()), axis, nodes);
    if (!b) return;
    // Bias: int32 in x_scale * w_scale units (QLinearConv's).
    const int64_t m = b->numel();
    std::vector<int32_t> q(static_cast<size_t>(m));
    std::vector<float> unit(static_cast<size_t>(ws.numel()));
    for (size_t c = 0; c < unit.size(); ++c) unit[c] = x.scale * ws.data<float>()[c];
    for (int64_t c = 0; c < m; ++c) {
      const double v = std::nearbyint(b->item_double(c) / unit[unit.size() == 1 ? 0 : size_t(c)]);
      q[size_t(c)] = int32_t(std::clamp(v, -2147483647.0, 2147483647.0));
    }
    const Tensor us = unit.size() == 1 ? Tensor::from_vector(unit, {}) : Tensor::from_vector(unit, {m});
    const std::string us_name = add_initializer(base + "_bias_scale", us);
    n.inputs[2] = dequantize(base + "_bias", Tensor::from_vector(q, {m}), us_name, Tensor(),
                             unit.size() == 1 ? Attributes{} : Attributes{{"axis", Attribute(int64_t(0))}}, nodes);
  }

  // A DequantizeLinear of a new integer initializer; returns its output.
  std::string dequantize(const std::string& base, Tensor data, const std::string& scale, Tensor zero_point,
                         Attributes attrs, std::vector<Node>& nodes) {
    std::vector<std::string> inputs{add_initializer(base + "_quantized", std::move(data)), scale};
    if (zero_point.defined()) inputs.push_back(add_initializer(base + "_zero_point", std::move(zero_point)));
    const std::string out = fresh(base + "_dequantized");
    nodes.push_back(node("DequantizeLinear", inputs, out, std::move(attrs)));
    return out;
  }

  Model& model_;
  Graph& g_;
  const QuantizeSettings& settings_;
  QuantizeReport& report_;
  bool onnx_output_;
  const std::map<std::string, double>& sensitive_;  // product output -> its cosine drop (kept float)
  std::set<std::string> names_;
  std::vector<Product> products_;
  std::map<std::string, std::string> range_of_;  // activation -> the activation whose range it takes
  std::set<std::string> dynamic_;                 // activations quantized per call (dynamic)
};

// An executor of a copy of `model` whose outputs are followed by the values `names` (graph inputs
// are not outputs: their indices in `from_input`, with the rest's in `from_output`).
struct CollectingExecutor {
  std::unique_ptr<Executor> executor;
  std::vector<std::pair<size_t, size_t>> from_output, from_input;  // (name index, output / input index)

  CollectingExecutor(const Model& model, const std::vector<std::string>& names) {
    auto copy = std::make_shared<Model>(model);
    copy->graph = std::make_shared<Graph>(*model.graph);
    for (size_t i = 0; i < names.size(); ++i) {
      auto in = std::find_if(copy->graph->inputs.begin(), copy->graph->inputs.end(),
                             [&](const ValueInfo& v) { return v.name == names[i]; });
      if (in != copy->graph->inputs.end()) {
        from_input.push_back({i, size_t(in - copy->graph->inputs.begin())});
        continue;
      }
      ValueInfo out{names[i], {}};
      if (auto t = passes::value_type(*copy->graph, names[i])) out.type = *t;
      from_output.push_back({i, copy->graph->outputs.size()});
      copy->graph->outputs.push_back(out);
    }
    executor = std::make_unique<Executor>(std::shared_ptr<const Model>(copy), Device::cpu(), ExecutorOptions{true, false});
  }

  // The values of `names` for one sample (undefined where a run gives none).
  std::vector<Tensor> run(const Sample& sample) {
    std::vector<Value> feeds(sample.begin(), sample.end());
    Executor::Result r = executor->run(feeds);
    std::vector<Tensor> values(from_output.size() + from_input.size());
    for (auto [name, out] : from_output) {
      if (r.outputs[out].kind == Value::Kind::Tensor) values[name] = r.outputs[out].tensor;
    }
    for (auto [name, in] : from_input) values[name] = sample[in];
    return values;
  }
};

// Runs `model` on the CPU over `samples`, handing each run's values of `names` to `fn`.
void run_collecting(const Model& model, const std::vector<std::string>& names, const std::vector<Sample>& samples,
                    const std::string& step, const QuantizeSettings& settings,
                    const std::function<void(size_t, const Tensor&)>& fn) {
  CollectingExecutor ex(model, names);
  for (size_t s = 0; s < samples.size(); ++s) {
    std::vector<Tensor> values = ex.run(samples[s]);
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i].defined()) fn(i, values[i]);
    }
    if (settings.progress) settings.progress(step, int64_t(s + 1), int64_t(samples.size()));
  }
}

// Cosine similarity of each of `names` between two models over every sample (flattened, summed).
std::vector<double> cosines(const Model& a, const Model& b, const std::vector<std::string>& names,
                            const std::vector<Sample>& samples) {
  CollectingExecutor ea(a, names), eb(b, names);
  std::vector<double> dot(names.size()), na(names.size()), nb(names.size());
  for (const Sample& s : samples) {
    std::vector<Tensor> va = ea.run(s), vb = eb.run(s);
    for (size_t i = 0; i < names.size(); ++i) {
      if (!va[i].defined() || !vb[i].defined() || va[i].numel() != vb[i].numel()) continue;
      const Tensor x = va[i].cast(DType::Float64), y = vb[i].cast(DType::Float64);
      const double* xp = x.data<double>();
      const double* yp = y.data<double>();
      for (int64_t k = 0; k < x.numel(); ++k) {
        dot[i] += xp[k] * yp[k];
        na[i] += xp[k] * xp[k];
        nb[i] += yp[k] * yp[k];
      }
    }
  }
  std::vector<double> out(names.size(), 1.0);
  for (size_t i = 0; i < names.size(); ++i) {
    if (na[i] > 0 && nb[i] > 0) out[i] = dot[i] / std::sqrt(na[i] * nb[i]);
  }
  return out;
}

// Cross-layer equalization (Nagel et al., "Data-Free Quantization Through Weight Equalization and
// Bias Correction", 2019), with the ranges measured on the calibration samples. A depthwise
// convolution (one output channel per input channel) whose output only a 1x1 convolution reads
// (directly, or through a Relu / LeakyRelu, which commute with positive scales) computes y = W2 . d,
// d = W1 * x; with d' = diag(s) d (W1's channel c and its bias times s_c) and
// W2' = W2 diag(1/s), y is unchanged, while d' is quantized with one scale for all its channels. On
// BlazeFace back the depthwise outputs' per-channel ranges spread 2-40x (largest over median), so
// the per-tensor uint8 scale left the narrow channels a few steps. s_c = (R / r_c)^kPower, r_c the
// channel's largest magnitude and R the tensor's: 1 would make every channel as wide as the widest,
// but shrinks W2's narrow input channels as much within its per-output-channel int8 scale; 0.75
// measured best (BlazeFace back output cosines 0.88/0.96/0.88/0.97 -> 0.98/0.95/0.97/0.997; 0.5:
// 0.93/0.94/0.95/0.996; 1: 0.97/0.95/0.97/0.996). Dead channels (r_c = 0) stay as they are.
void equalize_depthwise(Model& model, const std::vector<Sample>& samples, const QuantizeSettings& settings,
                        QuantizeReport& report) {
  constexpr double kPower = 0.75;
  Graph& g = *model.graph;
  std::map<std::string, std::vector<size_t>> readers;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& in : g.nodes[i].inputs)
      if (!in.empty()) readers[in].push_back(i);
  std::set<std::string> graph_outputs;
  for (const ValueInfo& o : g.outputs) graph_outputs.insert(o.name);
  auto read_once = [&](const std::string& name) { return readers[name].size() == 1; };
  // A plain 2-D Conv with a float32 constant weight (read by it alone), and its bias likewise.
  auto conv_weight = [&](const Node& n) -> const Tensor* {
    if (n.op_type != "Conv" || !n.domain.empty() || n.inputs.size() < 2 || n.outputs.size() != 1) return nullptr;
    const Tensor* w = constant_initializer(g, n.inputs[1]);
    if (!w || w->dtype() != DType::Float32 || w->rank() != 4 || !read_once(n.inputs[1])) return nullptr;
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      const Tensor* b = constant_initializer(g, n.inputs[2]);
      if (!b || b->dtype() != DType::Float32 || !read_once(n.inputs[2])) return nullptr;
    }
    return w;
  };
  std::vector<std::pair<size_t, size_t>> pairs;  // (depthwise, 1x1)
  std::vector<std::string> names;                // the depthwise outputs
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const Tensor* w1 = conv_weight(n);
    if (!w1 || w1->dim(1) != 1 || passes::attr_int(n, "group", 1) != w1->dim(0) || w1->dim(0) < 2) continue;
    // The value the 1x1 convolution reads: the depthwise output, or a Relu / LeakyRelu of it, which
    // commute with a positive per-channel scale (MobileNetV1's blocks; not ReLU6 or HardSwish).
    std::string d = n.outputs[0];
    if (graph_outputs.count(d) || !read_once(d)) continue;
    size_t j = readers[d][0];
    if (const Node& a = g.nodes[j]; (a.op_type == "Relu" || a.op_type == "LeakyRelu") && a.domain.empty()) {
      d = a.outputs.at(0);
      if (graph_outputs.count(d) || !read_once(d)) continue;
      j = readers[d][0];
    }
    const Node& p = g.nodes[j];
    const Tensor* w2 = conv_weight(p);
    if (!w2 || p.inputs[0] != d || passes::attr_int(p, "group", 1) != 1 || w2->dim(1) != w1->dim(0) ||
        w2->dim(2) != 1 || w2->dim(3) != 1)
      continue;
    pairs.emplace_back(i, j);
    names.push_back(d);
  }
  if (pairs.empty()) return;
  std::vector<std::vector<double>> widest(names.size());  // per channel: the largest |value| seen
  run_collecting(model, names, samples, "equalize", settings, [&](size_t k, const Tensor& t) {
    if (t.rank() != 4 || t.dtype() != DType::Float32) return;
    const int64_t batch = t.dim(0), channels = t.dim(1), plane = t.dim(2) * t.dim(3);
    std::vector<double>& r = widest[k];
    r.resize(size_t(channels), 0.0);
    const float* v = t.data<float>();
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t c = 0; c < channels; ++c) {
        const float* p = v + (b * channels + c) * plane;
        float m = 0;
        for (int64_t k2 = 0; k2 < plane; ++k2) m = std::max(m, std::fabs(p[k2]));
        r[size_t(c)] = std::max(r[size_t(c)], double(m));
      }
  });
  int64_t equalized = 0;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const std::vector<double>& r = widest[k];
    Node& dw = g.nodes[pairs[k].first];
    Node& pw = g.nodes[pairs[k].second];
    const Tensor& w1 = g.initializers.at(dw.inputs[1]);
    const Tensor& w2 = g.initializers.at(pw.inputs[1]);
    const int64_t channels = w1.dim(0);
    if (int64_t(r.size()) != channels) continue;
    const double widest_all = *std::max_element(r.begin(), r.end());
    if (widest_all <= 0) continue;
    std::vector<float> s(static_cast<size_t>(channels), 1.0f);
    for (int64_t c = 0; c < channels; ++c)
      s[size_t(c)] = r[size_t(c)] > 0 ? float(std::pow(widest_all / r[size_t(c)], kPower)) : 1.0f;
    std::vector<float> a = w1.to_vector<float>(), b = w2.to_vector<float>();
    const int64_t per_channel = w1.numel() / channels, outputs = w2.dim(0);
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t e = 0; e < per_channel; ++e) a[size_t(c * per_channel + e)] *= s[size_t(c)];
    for (int64_t m = 0; m < outputs; ++m)
      for (int64_t c = 0; c < channels; ++c) b[size_t(m * channels + c)] /= s[size_t(c)];
    g.initializers[dw.inputs[1]] = Tensor::from_vector(a, w1.shape());
    g.initializers[pw.inputs[1]] = Tensor::from_vector(b, w2.shape());
    if (dw.inputs.size() > 2 && !dw.inputs[2].empty()) {
      const Tensor& bias = g.initializers.at(dw.inputs[2]);
      std::vector<float> v = bias.to_vector<float>();
      for (int64_t c = 0; c < channels && c < int64_t(v.size()); ++c) v[size_t(c)] *= s[size_t(c)];
      g.initializers[dw.inputs[2]] = Tensor::from_vector(v, bias.shape());
    }
    ++equalized;
  }
  if (equalized > 0)
    report.notes.push_back(fmt::format("equalized the channels of {} depthwise -> 1x1 convolution pairs (--no-equalize)",
                                       equalized));
}

// Per-channel means of a tensor stream: channel axis 1 (a convolution's output), or the last (a
// Gemm's).
// A float32 tensor of rank >= 2 as [outer, channels, inner] around its channel axis (1, or the
// last); channels 0 for anything else.
struct ChannelSplit {
  int64_t outer = 1, channels = 0, inner = 1;
};
ChannelSplit split_channels(const Tensor& t, bool last_axis) {
  ChannelSplit s;
  if (t.dtype() != DType::Float32 || t.rank() < 2) return s;
  const int axis = last_axis ? int(t.rank()) - 1 : 1;
  for (int i = 0; i < int(t.rank()); ++i)
    if (i != axis) (i < axis ? s.outer : s.inner) *= t.dim(i);
  s.channels = t.dim(axis);
  return s;
}

struct ChannelMeans {
  bool last_axis = false;
  std::vector<double> sum;
  int64_t count = 0;

  void add(const Tensor& t) {
    const ChannelSplit s = split_channels(t, last_axis);
    if (s.channels == 0) return;
    if (sum.empty()) sum.resize(size_t(s.channels), 0.0);
    if (int64_t(sum.size()) != s.channels) return;
    const float* v = t.data<float>();
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t c = 0; c < s.channels; ++c) {
        const float* p = v + (o * s.channels + c) * s.inner;
        double acc = 0;
        for (int64_t i = 0; i < s.inner; ++i) acc += p[i];
        sum[size_t(c)] += acc;
      }
    count += s.outer * s.inner;
  }
  double mean(size_t c) const { return count ? sum[c] / double(count) : 0.0; }
};

// Adds `shift[c]` to channel c of `t` (channel axis 1, or the last).
void add_channel_shift(Tensor& t, const std::vector<double>& shift, bool last_axis) {
  const ChannelSplit s = split_channels(t, last_axis);
  if (s.channels == 0 || s.channels != int64_t(shift.size())) return;
  float* v = t.data<float>();
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t c = 0; c < s.channels; ++c) {
      float* p = v + (o * s.channels + c) * s.inner;
      const float d = float(shift[size_t(c)]);
      for (int64_t i = 0; i < s.inner; ++i) p[i] += d;
    }
}

// Empirical bias correction (Nagel et al. 2019, section 4.2, with the statistics measured rather than
// derived, as AIMET does it): quantizing a product's weights and input shifts the mean of its output
// per channel, since E[(W_q - W) x] is not zero where x's mean is not (after a ReLU it never is),
// most for depthwise convolutions, whose channels each sum a few products; clipped ranges and the
// rectified noise of the layers before shift it too. Each quantized convolution's / Gemm's output in
// the QDQ model (`quantized`) gets the shift that brings its per-channel mean on the calibration
// samples back to the float model's (`reference`), then folded into its float bias in `prepared`
// (added where it has none), from which the QDQ rewrite makes the int32 one.
//
// A product's shift changes the inputs of every product after it, so they are measured in order, as
// AIMET does, but without a run of the model per product: the QDQ model runs in segments, segment w
// holding the nodes with w quantized products upstream on their longest path (so segment w's
// products read only what earlier segments made). Each segment is compiled on its own (its Q/DQ
// folded into the integer kernels) and runs over every sample once, from the values the earlier
// segments left; its products' shifts are then measured and added to their outputs before the next
// segment reads them. Returns the products corrected and the largest shift relative to its output's
// largest channel mean ({0, 0} for a model with control flow, whose subgraphs read outer values).
std::pair<int, double> correct_biases(const Model& reference, Model& prepared, const Model& quantized,
                                      const std::vector<std::pair<std::string, std::string>>& io,
                                      const std::vector<Sample>& samples, const QuantizeSettings& settings) {
  struct Corrected {
    std::string name;  // the product's output
    size_t node;       // its node in `prepared`
    bool gemm;         // channels on the last axis (else axis 1)
    int64_t channels;
    std::vector<double> shift;
  };
  const Graph& qg = *quantized.graph;
  bool control_flow = false;
  qg.for_each_graph([&](const Graph&, int depth) { control_flow |= depth > 0; });
  if (control_flow) return {0, 0.0};
  Graph& g = *prepared.graph;
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!g.nodes[i].outputs.empty()) producer[g.nodes[i].outputs[0]] = i;
  std::vector<Corrected> products;
  for (const auto& io_k : io) {
    auto p = producer.find(io_k.second);
    if (p == producer.end()) continue;
    const Node& n = g.nodes[p->second];
    const Tensor* w = constant_initializer(g, n.inputs[1]);
    if (!w || !(is_op(n, "Conv") || is_op(n, "Gemm"))) continue;  // a MatMul has no bias
    const bool gemm = is_op(n, "Gemm");
    const int64_t channels = gemm ? (passes::attr_int(n, "transB", 0) ? w->dim(0) : w->dim(1)) : w->dim(0);
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      const Tensor* b = constant_initializer(g, n.inputs[2]);
      if (!b || b->dtype() != DType::Float32 || b->numel() != channels) continue;
    }
    products.push_back({io_k.second, p->second, gemm, channels, std::vector<double>(size_t(channels), 0.0)});
  }
  if (products.empty()) return {0, 0.0};

  // The float model's means.
  std::vector<std::string> names;
  std::map<std::string, size_t> index;
  for (size_t k = 0; k < products.size(); ++k) {
    names.push_back(products[k].name);
    index[products[k].name] = k;
  }
  std::vector<ChannelMeans> want(products.size());
  for (size_t k = 0; k < products.size(); ++k) want[k].last_axis = products[k].gemm;
  run_collecting(reference, names, samples, "bias correction (float)", settings,
                 [&](size_t k, const Tensor& t) { want[k].add(t); });

  // Each node's segment, and the last segment reading each value.
  std::vector<int> segment(qg.nodes.size());
  std::map<std::string, int> wave_of, last_read;
  int segments = 0;
  for (size_t i = 0; i < qg.nodes.size(); ++i) {
    const Node& n = qg.nodes[i];
    int w = 0;
    for (const std::string& in : n.inputs)
      if (auto it = wave_of.find(in); it != wave_of.end()) w = std::max(w, it->second);
    segment[i] = w;
    segments = std::max(segments, w + 1);
    const bool product = !n.outputs.empty() && index.count(n.outputs[0]);
    for (const std::string& out : n.outputs) wave_of[out] = product ? w + 1 : w;
    for (const std::string& in : n.inputs)
      if (!in.empty()) last_read[in] = std::max(last_read[in], w);
  }
  std::vector<std::map<std::string, Tensor>> live(samples.size());  // per sample: the values made so far
  for (size_t s = 0; s < samples.size(); ++s)
    for (size_t i = 0; i < qg.inputs.size() && i < samples[s].size(); ++i) live[s][qg.inputs[i].name] = samples[s][i];
  double largest = 0;
  for (int seg = 0; seg < segments; ++seg) {
    auto part = std::make_shared<Model>(quantized);
    part->graph = std::make_shared<Graph>();
    Graph& pg = *part->graph;
    pg.name = qg.name;
    pg.value_info = qg.value_info;
    std::set<std::string> made;
    for (size_t i = 0; i < qg.nodes.size(); ++i) {
      if (segment[i] != seg) continue;
      const Node& n = qg.nodes[i];
      for (const std::string& in : n.inputs) {
        if (in.empty() || made.count(in)) continue;
        if (auto it = qg.initializers.find(in); it != qg.initializers.end()) {
          pg.initializers[in] = it->second;
        } else if (std::none_of(pg.inputs.begin(), pg.inputs.end(), [&](const ValueInfo& v) { return v.name == in; })) {
          ValueInfo v{in, {}};
          if (auto t = passes::value_type(qg, in)) v.type = *t;
          pg.inputs.push_back(v);
        }
      }
      for (const std::string& out : n.outputs) {
        if (out.empty()) continue;
        made.insert(out);
        auto r = last_read.find(out);
        if ((r != last_read.end() && r->second > seg) || index.count(out)) {
          ValueInfo v{out, {}};
          if (auto t = passes::value_type(qg, out)) v.type = *t;
          pg.outputs.push_back(v);
        }
      }
      pg.nodes.push_back(n);
    }
    if (pg.nodes.empty() || pg.outputs.empty()) continue;
    compile(*part, {});
    Executor ex(part, Device::cpu(), ExecutorOptions{true, false});
    std::vector<ChannelMeans> got(products.size());
    for (size_t k = 0; k < products.size(); ++k) got[k].last_axis = products[k].gemm;
    for (size_t s = 0; s < samples.size(); ++s) {
      std::vector<Value> feeds;
      for (const ValueInfo& in : pg.inputs) feeds.emplace_back(live[s].at(in.name));
      Executor::Result r = ex.run(feeds);
      for (size_t o = 0; o < pg.outputs.size(); ++o) {
        if (r.outputs[o].kind != Value::Kind::Tensor) continue;
        const std::string& name = pg.outputs[o].name;
        live[s][name] = r.outputs[o].tensor;
        if (auto k = index.find(name); k != index.end()) got[k->second].add(r.outputs[o].tensor);
      }
    }
    // This segment's products: their shifts, applied to what the later segments read.
    for (const auto& out : pg.outputs) {
      auto k = index.find(out.name);
      if (k == index.end()) continue;
      Corrected& c = products[k->second];
      const ChannelMeans& a = want[k->second];
      const ChannelMeans& b = got[k->second];
      if (a.sum.size() != size_t(c.channels) || b.sum.size() != size_t(c.channels)) continue;
      double spread = 0;
      for (size_t ch = 0; ch < a.sum.size(); ++ch) spread = std::max(spread, std::abs(a.mean(ch)));
      for (size_t ch = 0; ch < a.sum.size(); ++ch) {
        c.shift[ch] = a.mean(ch) - b.mean(ch);
        if (spread > 0) largest = std::max(largest, std::abs(c.shift[ch]) / spread);
      }
      for (auto& values : live) {
        auto v = values.find(c.name);
        if (v != values.end()) add_channel_shift(v->second, c.shift, c.gemm);
      }
    }
    // What no later segment reads.
    for (auto& values : live)
      for (auto it = values.begin(); it != values.end();) {
        auto r = last_read.find(it->first);
        it = r == last_read.end() || r->second <= seg ? values.erase(it) : std::next(it);
      }
    if (settings.progress) settings.progress("bias correction", seg + 1, segments);
  }

  // Into the float biases (fresh initializers: the old ones may be shared).
  for (const Corrected& c : products) {
    Node& n = g.nodes[c.node];
    std::vector<float> bias(size_t(c.channels), 0.0f);
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) bias = constant_initializer(g, n.inputs[2])->to_vector<float>();
    for (int64_t ch = 0; ch < c.channels; ++ch) bias[size_t(ch)] += float(c.shift[size_t(ch)]);
    std::string name = n.outputs[0] + "_corrected_bias";
    for (int i = 1; g.initializers.count(name); ++i) name = n.outputs[0] + "_corrected_bias_" + std::to_string(i);
    g.initializers[name] = Tensor::from_vector(bias, {c.channels});
    if (n.inputs.size() < 3) n.inputs.resize(3);
    n.inputs[2] = name;
  }
  dead_code(prepared);
  return {int(products.size()), largest};
}

}  // namespace

void quantize_model(Model& model, const std::vector<Sample>& samples, const QuantizeSettings& settings,
                    QuantizeReport& report, bool onnx_output) {
  if (samples.empty() && !settings.dynamic) fail("int8 quantization needs at least one calibration sample");
  prepare(model);
  if (settings.equalize && !settings.dynamic && !samples.empty()) equalize_depthwise(model, samples, settings, report);
  // The float model as prepared: each round of the sensitivity search quantizes a copy of it.
  Model prepared = model;
  prepared.graph = std::make_shared<Graph>(*model.graph);
  const QuantizeReport start = report;
  std::map<std::string, double> sensitive;  // products kept in float32 for accuracy
  std::map<std::string, QuantParams> params;
  std::vector<std::pair<std::string, std::string>> io;  // the quantized products' input and output
  // `model` := the QDQ rewrite of `prepared`; the first one calibrates the activations' ranges, which
  // later rewrites (a subset of the activations, or corrected biases) reuse.
  auto write = [&]() {
    report = start;
    *model.graph = *prepared.graph;
    QdqWriter writer(model, settings, report, onnx_output, sensitive);
    writer.plan();
    if (params.empty() && !settings.dynamic) {
      const std::vector<std::string> names = writer.observed();
      std::vector<RangeObserver> observers(names.size());
      run_collecting(model, names, samples, "calibrate", settings,
                     [&](size_t i, const Tensor& t) { observers[i].observe_range(t); });
      if (settings.method != CalibrationMethod::MinMax) {
        run_collecting(model, names, samples, "calibrate (histograms)", settings,
                       [&](size_t i, const Tensor& t) { observers[i].observe_histogram(t); });
      }
      for (size_t i = 0; i < names.size(); ++i) {
        auto [lo, hi] = observers[i].range(settings.method, settings.percentile, settings.symmetric);
        params[names[i]] = activation_params(lo, hi, settings.symmetric);
      }
    }
    io = writer.product_io();
    writer.rewrite(params);
    dead_code(model);  // the float weights the int8 ones replaced
  };
  constexpr int kRounds = 8;
  for (int round = 0;; ++round) {
    write();
    if (settings.min_cosine <= 0 || io.empty() || samples.empty()) break;
    // Sensitivity: the QDQ model (its Q/DQ as float ops) against the float one, at the graph outputs
    // and at every product's input and output; the products whose own quantization lowers the
    // similarity most stay in float32, a few per round, until the outputs reach min_cosine.
    std::vector<std::string> names;
    for (const ValueInfo& o : model.graph->outputs) names.push_back(o.name);
    const size_t n_outputs = names.size();
    for (const auto& [in, out] : io) {
      names.push_back(in);
      names.push_back(out);
    }
    const std::vector<double> cos = cosines(prepared, model, names, samples);
    const double worst = *std::min_element(cos.begin(), cos.begin() + long(n_outputs));
    if (settings.progress) settings.progress("sensitivity", round + 1, kRounds);
    if (worst >= settings.min_cosine || round + 1 == kRounds) {
      if (worst < settings.min_cosine)
        report.notes.push_back(fmt::format("--min-cosine {}: the outputs reach {:.5f} after {} rounds",
                                           settings.min_cosine, worst, kRounds));
      break;
    }
    std::vector<std::pair<double, std::string>> drops;
    for (size_t k = 0; k < io.size(); ++k) {
      const double drop = cos[n_outputs + 2 * k] - cos[n_outputs + 2 * k + 1];
      if (drop > 0) drops.emplace_back(drop, io[k].second);
    }
    if (drops.empty()) break;
    std::sort(drops.rbegin(), drops.rend());
    for (size_t k = 0; k < drops.size() && k < 3 && drops[k].first >= drops[0].first / 2; ++k)
      sensitive[drops[k].second] = drops[k].first;
  }
  if (settings.bias_correction && !settings.dynamic && !samples.empty() && !io.empty()) {
    Model reference = prepared;  // the float model (`prepared` takes the corrected biases)
    reference.graph = std::make_shared<Graph>(*prepared.graph);
    const auto [corrected, largest] = correct_biases(reference, prepared, model, io, samples, settings);
    if (corrected > 0) {
      write();
      report.notes.push_back(fmt::format("corrected the biases of {} products for the shift of their outputs' "
                                         "per-channel means (largest: {:.3g} of the output's largest mean; "
                                         "--no-bias-correction)",
                                         corrected, largest));
    }
  }
  report.samples = int64_t(samples.size());
  verify(model);
}

void evaluate(std::shared_ptr<const Model> reference, std::shared_ptr<const Model> quantized,
              const std::vector<Sample>& samples, const QuantizeSettings& settings, QuantizeReport& report) {
  Executor ref(reference, Device::cpu(), ExecutorOptions{true, false});
  Executor q(quantized, Device::cpu(), ExecutorOptions{true, false});
  const auto& outs = reference->graph->outputs;
  struct Sums {
    double max_abs = 0, sum_abs = 0, dot = 0, ref_sq = 0, q_sq = 0;
    int64_t count = 0;
  };
  std::vector<Sums> sums(outs.size());
  for (size_t s = 0; s < samples.size(); ++s) {
    std::vector<Value> feeds(samples[s].begin(), samples[s].end());
    Executor::Result a = ref.run(feeds);
    Executor::Result b = q.run(feeds);
    for (size_t o = 0; o < outs.size() && o < b.outputs.size(); ++o) {
      if (a.outputs[o].kind != Value::Kind::Tensor || b.outputs[o].kind != Value::Kind::Tensor) continue;
      const Tensor x = a.outputs[o].tensor.to(Device::cpu()).cast(DType::Float64);
      const Tensor y = b.outputs[o].tensor.to(Device::cpu()).cast(DType::Float64);
      if (x.numel() != y.numel()) fail("output '{}': the quantized model gives {} for {}", outs[o].name, y.describe(), x.describe());
      const double* xp = x.data<double>();
      const double* yp = y.data<double>();
      Sums& m = sums[o];
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double d = std::abs(xp[i] - yp[i]);
        m.max_abs = std::max(m.max_abs, d);
        m.sum_abs += d;
        m.dot += xp[i] * yp[i];
        m.ref_sq += xp[i] * xp[i];
        m.q_sq += yp[i] * yp[i];
      }
      m.count += x.numel();
    }
    if (settings.progress) settings.progress("evaluate", int64_t(s + 1), int64_t(samples.size()));
  }
  report.outputs.clear();
  for (size_t o = 0; o < outs.size(); ++o) {
    const Sums& m = sums[o];
    OutputAccuracy acc;
    acc.name = outs[o].name;
    acc.max_abs = m.max_abs;
    acc.mean_abs = m.count ? m.sum_abs / double(m.count) : 0;
    const double norms = std::sqrt(m.ref_sq) * std::sqrt(m.q_sq);
    acc.cosine = norms > 0 ? m.dot / norms : (m.ref_sq == m.q_sq ? 1.0 : 0.0);
    report.outputs.push_back(acc);
  }
}

}  // namespace quant

std::string QuantizeReport::text() const {
  std::string s = fmt::format("int8: {} products quantized, {} left in float32, {} calibration samples\n", quantized,
                              kept_float.size(), samples);
  for (const std::string& k : kept_float) s += "  float32: " + k + "\n";
  for (const std::string& n : notes) s += "  note: " + n + "\n";
  if (!outputs.empty()) {
    s += fmt::format("  {:<32} {:>12} {:>12} {:>10}\n", "output (vs float32)", "max |err|", "mean |err|", "cosine");
    for (const OutputAccuracy& o : outputs)
      s += fmt::format("  {:<32} {:>12.4g} {:>12.4g} {:>10.6f}\n", o.name, o.max_abs, o.mean_abs, o.cosine);
  }
  return s;
}

std::string QuantizeReport::json() const {
  auto quote = [](const std::string& v) {
    std::string out = "\"";
    for (char c : v) {
      if (c == '"' || c == '\\') out += '\\';
      if (static_cast<unsigned char>(c) < 0x20) {
        out += fmt::format("\\u{:04x}", int(c));
        continue;
      }
      out += c;
    }
    return out + "\"";
  };
  std::string s = fmt::format("{{\n  \"samples\": {},\n  \"quantized\": {},\n  \"kept_float\": [", samples, quantized);
  s += join(kept_float, ", ", quote) + "],\n  \"notes\": [" + join(notes, ", ", quote) + "],\n  \"outputs\": [";
  for (size_t i = 0; i < outputs.size(); ++i) {
    const OutputAccuracy& o = outputs[i];
    s += fmt::format("{}\n    {{\"name\": {}, \"max_abs\": {:.6g}, \"mean_abs\": {:.6g}, \"cosine\": {:.8f}}}",
                     i ? "," : "", quote(o.name), o.max_abs, o.mean_abs, o.cosine);
  }
  return s + "\n  ]\n}\n";
}

QuantizeReport quantize(const std::string& model_path, const std::string& qdq_path, const QuantizeSettings& settings) {
  QuantizeReport report;
  std::shared_ptr<Model> model = quant::import_for_quantization(model_path, settings, report, true);
  const std::vector<quant::Sample> samples =
      settings.dynamic && settings.calibration.empty() ? std::vector<quant::Sample>{}
                                                       : quant::load_calibration(*model, settings.calibration);
  try {
    quant::quantize_model(*model, samples, settings, report, true);
  } catch (Error& e) {
    e.add_context("model '" + model->name + "'");
    throw;
  }
  save_onnx(*model, qdq_path);
  // The accuracy of what an Ingot session makes of the written model (its Q/DQ folded into integer
  // kernels) against the float model.
  std::shared_ptr<Model> reference = import_onnx(model_path);
  fix_input_shapes(*reference, settings.input_shapes);
  compile(*reference, {});
  std::shared_ptr<Model> written = import_onnx(qdq_path);
  compile(*written, {});
  if (!samples.empty()) quant::evaluate(reference, written, samples, settings, report);
  return report;
}

}  // namespace ingot
