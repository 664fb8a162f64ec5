// Channels-last layout for 1-D and 2-D convolutional networks (the compile pipeline's layout step:
// compiler/compile.cpp runs it after to_half_precision for a CUDA target in float16 or bfloat16, and
// for a CPU target, where it moves the int8 convolutions; INGOT_DISABLE_PASSES=channels-last skips
// it). On the CPU, oneDNN's int8 convolutions compute channels last: given NCHW they reorder their
// input and output at every call, which cost 3x the convolutions themselves on BlazeFace. cuDNN's tensor-core convolutions read and write
// NHWC: through its graph API (backends/cuda/cudnn_conv_graph.h) ResNet-50 fp16 runs 3x faster
// channels last than channels first on the H200; depthwise layers run Ingot's own NHWC kernel
// (docs/PERFORMANCE.md). Given NCW, cuDNN transposes a 16-bit 1-D convolution's input and output
// around its NWC kernel at every call (Whisper-tiny fp16 b32: ~290 us of its 4.2 ms).
//
// Rewrites, in graph order:
//   - Conv and ai.ingot.FusedConv with a constant 3-D or 4-D W and symmetric pads: FusedConv with
//     layout "NHWC" on the channels-last copy of X (and R), W permuted to [M, kH, kW, C/group] (1-D:
//     [M, kW, C/group]) at convert time; the result goes back to channels first through a Transpose
//     that keeps the node's output name, so readers that stay channels first see no change;
//   - ai.ingot.QuantizedConv (CPU target) likewise: layout "NHWC" on the channels-last X (and R), W
//     permuted the same way;
//   - elementwise nodes (activations, arithmetic, Clip, Cast, FusedElementwise, and per-tensor
//     QuantizeLinear / DequantizeLinear) whose non-constant
//     inputs all have a channels-last copy of one rank (3-D or 4-D): computed on those copies;
//     constant operands of at most that rank are permuted the same way (scalars stay), which keeps
//     numpy broadcasting the same;
//   - a model's own Transpose to channels last of a value we have channels last (a detection head
//     before its Reshape; Whisper's [N, C, T] -> [N, T, C] after its convolutions): that copy;
//   - GlobalAveragePool of a channels-last copy: ReduceMean over the spatial axes of it;
//   - a 2-D MaxPool (no Indices) of a channels-last copy whose dtype the target's ai.ingot.MaxPool
//     kernel takes (`pool_dtypes`): that op with layout "NHWC" (an int8 BlazeFace transposed around
//     each of its pools).
// Pooling, Concat and Resize follow 4-D values only. A channels-last copy of a value that is itself
// the channels-first view of a channels-last value is that value: Transpose pairs cancel as they are
// created, and dead_code drops the views nobody reads. What stays channels first (pooling windows,
// reshapes, matrix products) reads the views.
#include <ingot/ops.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ops/op_def.h"
#include "ops/semantics/conv_geometry.h"
#include "passes/pass.h"
#include "passes/pass_util.h"

namespace ingot {
namespace {

using namespace passes;

// Elementwise ops (the catalogue's tag) commute with the permutation, so they follow the layout; so
// do (de)quantizations with one scale and zero point.
bool is_elementwise(const Graph& g, const Node& n) {
  if (is_op(n, "QuantizeLinear") || is_op(n, "DequantizeLinear")) {
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      const Tensor* c = n.inputs[i].empty() ? nullptr : constant_initializer(g, n.inputs[i]);
      if (!n.inputs[i].empty() && (!c || c->numel() != 1)) return false;
    }
    return n.inputs.size() >= 2;
  }
  return OpCatalogue::instance().has_tag(n.domain, n.op_type, OpTag::Elementwise);
}

// The type of a channels-last copy of a value of `rank` (dims permuted when the shape is known).
std::optional<ValueType> permuted_type(const Graph& g, const std::string& name, size_t rank) {
  auto t = value_type(g, name);
  if (!t) return std::nullopt;
  if (t->shape && t->shape->size() == rank) {
    std::vector<Dim> d;
    for (int64_t a : sem::to_channels_last_perm(rank)) d.push_back((*t->shape)[size_t(a)]);
    t->shape = std::move(d);
  }
  return t;
}

// Pads of a convolution with `spatial` window axes that are the same at both ends of each axis.
bool symmetric_pads(const Node& n, size_t spatial) {
  auto ap = n.attrs.find("auto_pad");
  if (ap != n.attrs.end() && !ap->second.s.empty() && ap->second.s != "NOTSET" && ap->second.s != "VALID") return false;
  auto pads = n.attrs.find("pads");
  if (pads == n.attrs.end()) return true;
  const Ints& p = pads->second.ints;
  if (p.size() != 2 * spatial) return false;
  for (size_t i = 0; i < spatial; ++i) {
    if (p[i] != p[i + spatial]) return false;
  }
  return true;
}

class Rewriter {
 public:
  Rewriter(Model& model, ChannelsLastScope scope, std::vector<DType> pool_dtypes)
      : model_(model), g_(*model.graph), scope_(scope), pool_dtypes_(std::move(pool_dtypes)) {
    for (const auto& [name, t] : g_.initializers) taken_.insert(name);
    for (const ValueInfo& v : g_.inputs) taken_.insert(v.name);
    for (const auto& [name, v] : g_.value_info) taken_.insert(name);
    for (const Node& n : g_.nodes) {
      taken_.insert(n.name);
      taken_.insert(n.outputs.begin(), n.outputs.end());
      auto perm = n.attrs.find("perm");
      if (is_op(n, "Transpose") && n.inputs.size() == 1 && n.outputs.size() == 1 && perm != n.attrs.end()) {
        const size_t rank = perm->second.ints.size();
        if ((rank == 3 || rank == 4) && perm->second.ints == sem::to_channels_first_perm(rank))
          model_first_views_[n.outputs[0]] = n.inputs[0];
      }
    }
  }

  bool run() {
    std::vector<Node> out;
    for (Node& n : g_.nodes) {
      if (is_conv(n)) {
        convert_conv(n, out);
      } else if (is_elementwise(g_, n) && n.outputs.size() == 1 && convertible_operands(n)) {
        convert_elementwise(n, out);
      } else if (is_op(n, "MaxPool") && pool_follows(n)) {
        convert_max_pool(n, out);
      } else if (is_op(n, "GlobalAveragePool") && n.outputs.size() == 1 && last_rank(n.inputs[0]) == 4) {
        convert_global_average(n, out);
      } else if (is_op(n, "Concat") && n.outputs.size() == 1 && convertible_operands(n) == 4 && all_rank4(n)) {
        convert_concat(n, out);
      } else if (is_op(n, "Transpose") && n.outputs.size() == 1 && n.inputs.size() == 1 && last_rank(n.inputs[0]) &&
                 n.attrs.count("perm") && n.attrs.at("perm").ints == sem::to_channels_last_perm(last_rank(n.inputs[0]))) {
        // The model's own NC... -> N...C of a value we already have channels last (a detection
        // head before its Reshape, Whisper's [N, C, T] -> [N, T, C]): that copy, through an
        // Identity (a view).
        Node id;
        id.op_type = "Identity";
        id.name = n.name;
        id.inputs = {last_.at(n.inputs[0])};
        id.outputs = n.outputs;
        out.push_back(std::move(id));
        changed_ = true;
      } else if (is_op(n, "Resize") && n.outputs.size() == 1 && !n.inputs.empty() && last_rank(n.inputs[0]) == 4 &&
                 resize_follows(n)) {
        convert_resize(n, out);
      } else {
        out.push_back(std::move(n));
      }
    }
    g_.nodes = std::move(out);  // (every node was moved there, rewritten or not)
    if (!changed_) return false;
    dead_code(model_);
    return true;
  }

 private:
  bool is_conv(const Node& n) const {
    if (n.domain == kIngotDomain && n.op_type == "QuantizedConv") {
      if (n.outputs.size() != 1) return false;
      auto layout = n.attrs.find("layout");
      if (layout != n.attrs.end() && layout->second.s != "NCHW") return false;
      const Tensor* w = n.inputs.size() >= 4 ? constant_initializer(g_, n.inputs[3]) : nullptr;
      return w && w->rank() == 4 && w->device() == Device::cpu();
    }
    // Int8 only: oneDNN's float32 convolutions pick blocked layouts of their own, cuDNN's float32
    // ones compute channels first.
    if (scope_ == ChannelsLastScope::Int8Convolutions) return false;
    const bool fused = n.domain == kIngotDomain && n.op_type == "FusedConv";
    if (!fused && !is_op(n, "Conv")) return false;
    if (fused) {
      auto layout = n.attrs.find("layout");
      if (layout != n.attrs.end() && layout->second.s != "NCHW") return false;
    }
    const Tensor* w = n.inputs.size() >= 2 ? constant_initializer(g_, n.inputs[1]) : nullptr;
    return w && (w->rank() == 3 || w->rank() == 4) && w->device() == Device::cpu() && n.outputs.size() == 1 &&
           symmetric_pads(n, w->rank() - 2);
  }

  // The rank of `value`'s channels-last copy; 0 when it has none.
  size_t last_rank(const std::string& value) const {
    auto it = last_.find(value);
    return it == last_.end() ? 0 : rank_.at(it->second);
  }

  // The rank of the channels-last values among the inputs when every input is one of them (all of
  // one rank), a constant of at most that rank, or omitted, and at least one is; else 0.
  size_t convertible_operands(const Node& n) const {
    size_t rank = 0, constant_rank = 0;
    for (const auto& in : n.inputs) {
      if (in.empty()) continue;
      if (const size_t r = last_rank(in)) {
        if (rank && r != rank) return 0;
        rank = r;
      } else if (const Tensor* c = constant_initializer(g_, in)) {
        constant_rank = std::max(constant_rank, size_t(c->rank()));
      } else {
        return 0;
      }
    }
    return constant_rank <= rank ? rank : 0;
  }

  // A name no value, initializer or node of the graph has (the graph's nodes are being moved out,
  // so every name is collected up front).
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int i = 1; taken_.count(name); ++i) name = base + "_" + std::to_string(i);
    taken_.insert(name);
    return name;
  }

  // Every operand 4-D (constants too: Concat does not broadcast).
  bool all_rank4(const Node& n) const {
    for (const auto& in : n.inputs) {
      if (in.empty()) continue;
      const Tensor* c = constant_initializer(g_, in);
      auto t = c ? std::optional<ValueType>() : value_type(g_, in);
      if (c ? c->rank() != 4 : (!t || !t->shape || t->shape->size() != 4)) return false;
    }
    return true;
  }

  // The channels-last copy of `value` (a Transpose made once; the source of a view we made; the
  // input of a model's own channels-first Transpose of a 4-D value).
  std::string to_last(const std::string& value, size_t rank, std::vector<Node>& out) {
    if (auto it = last_.find(value); it != last_.end()) return it->second;
    if (auto it = model_first_views_.find(value); it != model_first_views_.end()) {
      rank_[it->second] = rank;
      return last_[value] = it->second;
    }
    Node t;
    t.op_type = "Transpose";
    t.name = fresh(value + "_nhwc");
    t.inputs = {value};
    t.outputs = {t.name};
    t.attrs["perm"] = Attribute(sem::to_channels_last_perm(rank));
    if (auto type = permuted_type(g_, value, rank)) g_.value_info[t.name] = {t.name, *type};
    last_[value] = t.name;
    rank_[t.name] = rank;
    out.push_back(std::move(t));
    return last_[value];
  }

  // A constant operand permuted like data of `rank` (padded to that rank first); scalars as they are.
  std::string constant_to_last(const std::string& name, size_t rank) {
    const Tensor& c = *constant_initializer(g_, name);
    if (c.numel() == 1) return name;
    const std::string key = name + "@" + std::to_string(rank);
    if (auto it = permuted_constants_.find(key); it != permuted_constants_.end()) return it->second;
    Shape padded(rank - size_t(c.rank()), 1);
    padded.insert(padded.end(), c.shape().begin(), c.shape().end());
    Tensor permuted = ops::transpose(c.reshape(padded), sem::to_channels_last_perm(rank));
    std::string fresh_name = fresh(name + "_nhwc");
    g_.initializers[fresh_name] = permuted;
    return permuted_constants_[key] = fresh_name;
  }

  // `n` (already given its channels-last inputs) writes a channels-last copy of its output; the
  // original name becomes a channels-first view of it.
  void emit_with_view(Node n, size_t rank, std::vector<Node>& out) {
    const std::string original = n.outputs[0];
    const std::string last = fresh(original + "_nhwc");
    if (auto type = permuted_type(g_, original, rank)) g_.value_info[last] = {last, *type};
    n.outputs[0] = last;
    Node view;
    view.op_type = "Transpose";
    view.name = fresh(original + "_nchw");
    view.inputs = {last};
    view.outputs = {original};
    view.attrs["perm"] = Attribute(sem::to_channels_first_perm(rank));
    out.push_back(std::move(n));
    out.push_back(std::move(view));
    last_[original] = last;
    rank_[last] = rank;
    changed_ = true;
  }

  void convert_conv(Node& n, std::vector<Node>& out) {
    if (n.op_type == "QuantizedConv") {
      Node c = n;
      c.attrs["layout"] = Attribute(std::string("NHWC"));
      c.inputs[0] = to_last(n.inputs[0], 4, out);
      std::string w_name = fresh(n.inputs[3] + "_ohwi");
      g_.initializers[w_name] = ops::transpose(*constant_initializer(g_, n.inputs[3]), sem::to_channels_last_perm(4));
      c.inputs[3] = w_name;
      if (c.inputs.size() > 9 && !c.inputs[9].empty()) c.inputs[9] = to_last(n.inputs[9], 4, out);
      emit_with_view(std::move(c), 4, out);
      return;
    }
    Node c = n;
    if (c.op_type == "Conv") {
      c.op_type = "FusedConv";
      c.domain = kIngotDomain;
      c.attrs["activation"] = Attribute(std::string());
      model_.opsets[kIngotDomain] = 1;
    }
    c.attrs["layout"] = Attribute(std::string("NHWC"));
    const Tensor& w = *constant_initializer(g_, n.inputs[1]);
    const size_t rank = w.rank();
    c.inputs[0] = to_last(n.inputs[0], rank, out);
    std::string w_name = fresh(n.inputs[1] + "_ohwi");
    g_.initializers[w_name] = ops::transpose(w, sem::to_channels_last_perm(rank));
    c.inputs[1] = w_name;
    if (c.inputs.size() > 3 && !c.inputs[3].empty()) c.inputs[3] = to_last(n.inputs[3], rank, out);
    emit_with_view(std::move(c), rank, out);
  }

  void convert_elementwise(Node& n, std::vector<Node>& out) {
    const size_t rank = convertible_operands(n);
    Node e = n;
    for (auto& in : e.inputs) {
      if (in.empty()) continue;
      in = last_.count(in) ? last_.at(in) : constant_to_last(in, rank);
    }
    emit_with_view(std::move(e), rank, out);
  }

  // Resize with constant per-axis scales or sizes (not a crop, which reads the roi per axis).
  bool resize_follows(const Node& n) const {
    auto mode = n.attrs.find("coordinate_transformation_mode");
    if (mode != n.attrs.end() && mode->second.s == "tf_crop_and_resize") return false;
    if (n.attrs.count("axes")) return false;
    bool any = false;
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      if (n.inputs[i].empty()) continue;
      const Tensor* c = constant_initializer(g_, n.inputs[i]);
      if (!c) return false;
      if (i == 1 && model_.opset("") >= 11) continue;  // roi: unused outside tf_crop_and_resize
      if (c->rank() != 1 || c->numel() != 4) return false;
      any = true;
    }
    return any;
  }

  // Resize of a channels-last copy: its scales/sizes permuted like the data.
  void convert_resize(Node& n, std::vector<Node>& out) {
    Node r = n;
    r.inputs[0] = last_.at(n.inputs[0]);
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      if (n.inputs[i].empty() || (i == 1 && model_.opset("") >= 11)) continue;
      const Tensor& c = *constant_initializer(g_, n.inputs[i]);
      const Ints perm = sem::to_channels_last_perm(4);
      Tensor permuted = Tensor::empty(c.dtype(), c.shape());
      const size_t bytes = dtype_size(c.dtype());
      for (size_t k = 0; k < 4; ++k)
        std::memcpy(static_cast<char*>(permuted.raw_data()) + k * bytes,
                    static_cast<const char*>(c.raw_data()) + size_t(perm[k]) * bytes, bytes);
      std::string name = fresh(n.inputs[i] + "_nhwc");
      g_.initializers[name] = permuted;
      r.inputs[i] = name;
    }
    emit_with_view(std::move(r), 4, out);
  }

  // Concat of channels-last copies along the same logical axis.
  void convert_concat(Node& n, std::vector<Node>& out) {
    (void)out;
    Node c = n;
    for (auto& in : c.inputs) {
      if (in.empty()) continue;
      in = last_.count(in) ? last_.at(in) : constant_to_last(in, 4);
    }
    const int64_t axis = (attr_int(n, "axis", 0) + 4) % 4;
    static const int64_t position[4] = {0, 3, 1, 2};  // NCHW axis -> NHWC axis
    c.attrs["axis"] = Attribute(position[axis]);
    emit_with_view(std::move(c), 4, out);
  }

  // A 2-D MaxPool without Indices of a channels-last value of a dtype the NHWC kernel takes.
  bool pool_follows(const Node& n) const {
    if (n.outputs.size() != 1 || n.inputs.size() != 1 || last_rank(n.inputs[0]) != 4) return false;
    auto kernel = n.attrs.find("kernel_shape");
    if (kernel == n.attrs.end() || kernel->second.ints.size() != 2) return false;
    auto t = value_type(g_, n.inputs[0]);
    return t && std::find(pool_dtypes_.begin(), pool_dtypes_.end(), t->dtype) != pool_dtypes_.end();
  }

  void convert_max_pool(Node& n, std::vector<Node>& out) {
    Node p = n;
    p.domain = kIngotDomain;
    p.inputs[0] = last_.at(n.inputs[0]);
    p.attrs.erase("storage_order");  // (it orders Indices only)
    p.attrs["layout"] = Attribute(std::string("NHWC"));
    model_.opsets[kIngotDomain] = 1;
    emit_with_view(std::move(p), 4, out);
  }

  void convert_global_average(Node& n, std::vector<Node>& out) {
    Node r;
    r.op_type = "ReduceMean";
    r.name = n.name;
    r.inputs = {last_.at(n.inputs[0])};
    r.outputs = n.outputs;
    r.attrs["keepdims"] = Attribute(int64_t(1));
    const Ints axes{1, 2};
    if (model_.opset("") >= 18) {
      std::string axes_name = fresh(n.outputs[0] + "_axes");
      g_.initializers[axes_name] = Tensor::from_vector<int64_t>(axes, {2});
      r.inputs.push_back(axes_name);
    } else {
      r.attrs["axes"] = Attribute(axes);
    }
    emit_with_view(std::move(r), 4, out);
  }

  Model& model_;
  Graph& g_;
  ChannelsLastScope scope_;
  std::vector<DType> pool_dtypes_;  // of channels-last MaxPools (empty: none)
  std::map<std::string, std::string> last_;  // value -> its channels-last copy
  std::map<std::string, size_t> rank_;       // a channels-last copy -> its rank (3 or 4)
  // The model's own NHWC -> NCHW Transposes (output -> input): that input is the output's channels-last copy.
  std::map<std::string, std::string> model_first_views_;
  std::map<std::string, std::string> permuted_constants_;  // "name@rank" -> the permuted copy
  std::set<std::string> taken_;  // names in use
  bool changed_ = false;
};

}  // namespace

bool to_channels_last(Model& model, ChannelsLastScope scope, std::vector<DType> pool_dtypes) {
  return Rewriter(model, scope, std::move(pool_dtypes)).run();
}

}  // namespace ingot
