// Neural-network modules and losses for training with autograd (include/ingot/autograd.h), after
// PyTorch's torch.nn: the same module names, constructor arguments, defaults, parameter names and
// initialisation, so that a model and its state_dict read the same in both.
//
// A Module owns named parameters (leaf tensors that require gradients) and buffers (BatchNorm's
// running statistics), and its submodules; names join with '.' as PyTorch's state_dict keys do
// ("0.weight", "fc1.bias"). Modules are created with std::make_shared and used through shared_ptr;
// a Layer is a module with one input and one output (forward(x)); Sequential chains layers.
// Every forward is ordinary op calls (ingot::ops::call), so the same model runs eagerly on the CPU
// or a GPU, records onto the tape, and traces under compile().
//
//   auto net = std::make_shared<nn::Sequential>(nn::Sequential{
//       std::make_shared<nn::Linear>(784, 256), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(256, 10)});
//   Tensor loss = nn::functional::cross_entropy(net->forward(x), labels);
//   loss.backward();
#pragma once
#include <ingot/export.h>
#include <ingot/session.h>
#include <ingot/tensor.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

INGOT_API_BEGIN
namespace ingot {

// Seeds the generator that parameter initialisation, dropout masks and data shuffling draw from
// (torch.manual_seed; the streams differ from PyTorch's).
void manual_seed(uint64_t seed);
// The next 64 random bits of that generator (thread-safe).
uint64_t random_u64();

namespace optim {
class CompiledStep;
}
namespace nn {

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Parameters of this module and its submodules, in registration order, named as state_dict keys.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  // Parameters and buffers by name (PyTorch's state_dict).
  std::map<std::string, Tensor> state_dict() const;
  // Copies each value into the parameter or buffer of that name, in place (so optimizers keep
  // working on the same tensors), converting dtype and device; shapes must match. strict: every
  // key of the module must be given and every given key must exist.
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);
  // Training mode (dropout active, batch norms use and update batch statistics) for this module and
  // its submodules; eval() is train(false).
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves every parameter and buffer to `device` (parameters stay leaves that require gradients).
  // Do it before creating an optimizer: the optimizer holds the tensors it was given.
  void to(Device device);
  // Converts every float parameter and buffer to `dtype` (PyTorch's module.double() and the like).
  void to(DType dtype);
  // Sets every parameter's gradient to none (PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();
  int64_t num_parameters() const;  // elements
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

 protected:
  // Registers a member tensor (which must outlive the module's use: a data member) under `name`.
  // A parameter is made a float leaf that requires gradients.
  void register_parameter(const std::string& name, Tensor& member);
  void register_buffer(const std::string& name, Tensor& member);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

 private:
  friend class optim::CompiledStep;  // rebinds buffers around a trace
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect(const std::string& prefix, bool params, std::vector<std::pair<std::string, Tensor*>>& out) const;
  std::vector<std::pair<std::string, Tensor*>> slots(bool params) const;
  std::vector<std::pair<std::string, Tensor*>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// A module with one input and one output.
class Layer : public Module {
 public:
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
};

// Layers applied in turn; named "0", "1", ... as PyTorch's nn.Sequential.
class Sequential : public Layer {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Layer>> layers);
  explicit Sequential(const std::vector<std::shared_ptr<Layer>>& layers);  // for std::make_shared
  Sequential& add(std::shared_ptr<Layer> layer);
  Tensor forward(const Tensor& x) override;
  size_t size() const { return layers_.size(); }
  const std::shared_ptr<Layer>& operator[](size_t i) const { return layers_.at(i); }

 private:
  std::vector<std::shared_ptr<Layer>> layers_;
};

// y = x W^T + b over the last axis; W [out, in] and b [out] ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Layer {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
};

// Convolutions over [N, C, L] (1-d) or [N, C, H, W] (2-d) with the same size, stride, padding and
// dilation along every spatial axis. W [out, in / groups, k...], b [out], both
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in / groups * k^d (PyTorch's default).
struct ConvOptions {
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = true;
};
class Conv : public Layer {
 public:
  Conv(int spatial_dims, int64_t in_channels, int64_t out_channels, int64_t kernel_size, ConvOptions options = {});
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;

 private:
  int dims_;
  ConvOptions options_;
};
class Conv1d : public Conv {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, ConvOptions options = {})
      : Conv(1, in_channels, out_channels, kernel_size, options) {}
};
class Conv2d : public Conv {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, ConvOptions options = {})
      : Conv(2, in_channels, out_channels, kernel_size, options) {}
};
// The transposed 2-d convolution; W [in, out / groups, k, k] (PyTorch's layout).
struct ConvTransposeOptions {
  int64_t stride = 1, padding = 0, output_padding = 0, dilation = 1, groups = 1;
  bool bias = true;
};
class ConvTranspose2d : public Layer {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, ConvTransposeOptions options = {});
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;

 private:
  ConvTransposeOptions options_;
};

// Batch normalization over [N, C] or [N, C, L] (BatchNorm1d) and [N, C, H, W] (BatchNorm2d). In
// training mode it normalizes with the batch's statistics and updates running_mean and running_var
// (running = (1 - momentum) running + momentum batch, the variance unbiased, as PyTorch); in eval
// mode it uses the running statistics. weight 1, bias 0.
struct BatchNormOptions {
  double eps = 1e-5, momentum = 0.1;
  bool affine = true, track_running_stats = true;
};
class BatchNorm : public Layer {
 public:
  BatchNorm(int64_t num_features, BatchNormOptions options = {});
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  BatchNormOptions options_;
};
class BatchNorm1d : public BatchNorm {
 public:
  using BatchNorm::BatchNorm;
};
class BatchNorm2d : public BatchNorm {
 public:
  using BatchNorm::BatchNorm;
};

// Normalization over the trailing `normalized_shape` axes; weight 1, bias 0.
class LayerNorm : public Layer {
 public:
  explicit LayerNorm(std::vector<int64_t> normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;

 private:
  std::vector<int64_t> shape_;
  double eps_;
};

// Normalization over groups of channels of [N, C, ...]; per-channel weight 1, bias 0.
class GroupNorm : public Layer {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;

 private:
  int64_t groups_, channels_;
  double eps_;
};

// Zeros each element with probability p in training mode and scales the rest by 1 / (1 - p).
class Dropout : public Layer {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;

 private:
  double p_;
};

// Rows of weight [num_embeddings, dim] ~ N(0, 1) looked up by integer indices.
class Embedding : public Layer {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& indices) override;
  Tensor weight;
};

// Recurrent layers, as torch.nn.LSTM / GRU: the same parameters (weight_ih_l0, weight_hh_l0,
// bias_ih_l0, bias_hh_l0, with "_reverse" for the backward direction; PyTorch's gate order, so that
// a PyTorch state_dict loads unchanged), U(-1/sqrt(H), 1/sqrt(H)) initialisation, and dropout
// between layers in training mode. Each layer runs as one ONNX LSTM / GRU op (the gate rows
// reordered to ONNX's order on the way; GRU is ONNX's linear_before_reset form, PyTorch's
// equations).
struct RNNOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;  // input and output [B, T, features] instead of [T, B, features]
  double dropout = 0.0;      // on each layer's output but the last, in training mode
  bool bidirectional = false;
};
struct RNNOutput {
  Tensor output;  // [T, B, directions * hidden] ([B, T, ...] with batch_first)
  Tensor h_n;     // [num_layers * directions, B, hidden]
  Tensor c_n;     // LSTM only
};
class RecurrentBase : public Module {
 public:
  int64_t input_size() const { return input_size_; }
  int64_t hidden_size() const { return hidden_size_; }
  const RNNOptions& options() const { return options_; }

 protected:
  RecurrentBase(const char* kind, int64_t gates, int64_t input_size, int64_t hidden_size, RNNOptions options);
  // x: [T, B, input] ([B, T, input] batch_first); h0 (and c0 for an LSTM): [layers * directions, B,
  // hidden], zeros when undefined.
  RNNOutput run(const Tensor& x, const Tensor& h0, const Tensor& c0);

 private:
  const char* kind_;
  int64_t gates_, input_size_, hidden_size_;
  RNNOptions options_;
  std::vector<std::unique_ptr<Tensor>> weights_;  // per layer and direction: w_ih, w_hh, [b_ih, b_hh]
};
class LSTM : public RecurrentBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, RNNOptions options = {});
  RNNOutput forward(const Tensor& x, const Tensor& h0 = {}, const Tensor& c0 = {});
};
class GRU : public RecurrentBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, RNNOptions options = {});
  RNNOutput forward(const Tensor& x, const Tensor& h0 = {});
};

// Multi-head attention, as torch.nn.MultiheadAttention: in_proj_weight [3E, E] (Xavier uniform),
// in_proj_bias [3E] and out_proj.bias zeros, out_proj a Linear(E, E). Attention itself is the
// fused ai.ingot.Attention op (flash kernels on the GPU, with their backward) unless the weights are
// asked for. Self-attention (query, key and value one tensor) projects with one product.
struct MultiheadAttentionOptions {
  double dropout = 0.0;  // attention-weight dropout: only 0 is supported
  bool bias = true;
  bool batch_first = false;  // [B, T, E] instead of [T, B, E]
};
struct AttentionInputs {
  // Added to the scores (float) or masking where true (bool): [L, S] or [B * heads, L, S].
  Tensor attn_mask{};
  Tensor key_padding_mask{};  // [B, S], float (added) or bool (true: ignore that key)
  bool is_causal = false;   // masks later keys (attn_mask then must be undefined)
  bool need_weights = false;  // also return the attention weights (not fused then)
  bool average_attn_weights = true;
};
struct AttentionOutput {
  Tensor output;   // [L, B, E] ([B, L, E] with batch_first)
  Tensor weights;  // [B, L, S] (averaged over heads) or [B, heads, L, S], when asked for
};
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options = {});
  AttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value, const AttentionInputs& extra = {});
  Tensor in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;

 private:
  int64_t embed_dim_, num_heads_;
  MultiheadAttentionOptions options_;
};

// Activations and shape layers.
class ReLU : public Layer {
 public:
  Tensor forward(const Tensor& x) override;
};
class LeakyReLU : public Layer {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : slope_(negative_slope) {}
  Tensor forward(const Tensor& x) override;

 private:
  double slope_;
};
class GELU : public Layer {  // exact (erf) form, PyTorch's default
 public:
  Tensor forward(const Tensor& x) override;
};
class SiLU : public Layer {
 public:
  Tensor forward(const Tensor& x) override;
};
class Sigmoid : public Layer {
 public:
  Tensor forward(const Tensor& x) override;
};
class Tanh : public Layer {
 public:
  Tensor forward(const Tensor& x) override;
};
// Flattens axes start_dim.. into one (PyTorch's nn.Flatten: start_dim 1).
class Flatten : public Layer {
 public:
  explicit Flatten(int64_t start_dim = 1) : start_(start_dim) {}
  Tensor forward(const Tensor& x) override;

 private:
  int64_t start_;
};
// 2-d pools; stride defaults to the kernel size, as PyTorch's.
class MaxPool2d : public Layer {
 public:
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0);
  Tensor forward(const Tensor& x) override;

 private:
  int64_t kernel_, stride_, padding_;
};
class AvgPool2d : public Layer {
 public:
  explicit AvgPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0);
  Tensor forward(const Tensor& x) override;

 private:
  int64_t kernel_, stride_, padding_;
};
// Mean over the spatial axes to 1 x 1 (AdaptiveAvgPool2d(1)).
class GlobalAvgPool : public Layer {
 public:
  Tensor forward(const Tensor& x) override;
};

// ---- Export (docs/TRAINING.md, "Export"): a module's forward traced once, in eval mode and without
// autocast, on example inputs, into an ONNX file or a precompiled .ingot package (what `ingot
// convert` would make of that ONNX file). Parameters and buffers keep their state_dict names as the
// graph's initializers. Errors (an op ONNX lacks, a forward that bakes the batch into a shape while
// dynamic_batch is asked for, an unwritable path) name the op or file at fault.
struct ExportOptions {
  std::vector<std::string> input_names;   // default "input" (one input) or "input_0", "input_1", ...
  std::vector<std::string> output_names;  // default "output" (one output) or "output_0", ...
  // Dim 0 of every input and output becomes the symbol "batch" (torch.onnx.export's dynamic_axes
  // for axis 0). The forward is traced a second time with another batch size to check that the
  // graph does not depend on it.
  bool dynamic_batch = false;
  std::string name = "ingot_model";  // the graph's name
  // export_package only: the device and precision the package is built for.
  Device device = Device::cpu();
  Precision precision = Precision::FP32;
};
// The traced function: the module's inputs to its outputs.
using ExportFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
void export_onnx(Module& module, const ExportFunction& forward, const std::vector<Tensor>& example_inputs,
                 const std::string& path, const ExportOptions& options = {});
void export_onnx(Layer& layer, const Tensor& example_input, const std::string& path, const ExportOptions& options = {});
void export_package(Module& module, const ExportFunction& forward, const std::vector<Tensor>& example_inputs,
                    const std::string& path, const ExportOptions& options = {});
void export_package(Layer& layer, const Tensor& example_input, const std::string& path,
                    const ExportOptions& options = {});

namespace functional {

// Losses, as torch.nn.functional's: reduction "mean" (default), "sum" or "none".
struct CrossEntropyOptions {
  std::optional<Tensor> weight = std::nullopt;  // per class [C]
  int64_t ignore_index = -100;
  std::string reduction = "mean";
  double label_smoothing = 0.0;
};
// input: logits [N, C] or [N, C, d...]; target: class indices (int64 or int32) [N] or [N, d...].
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options = {});
// input: log-probabilities [N, C, ...]; target as cross_entropy's (no label smoothing).
Tensor nll_loss(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options = {});
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// Sigmoid and binary cross-entropy in one numerically stable step; pos_weight weighs positives.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const std::optional<Tensor>& pos_weight = std::nullopt,
                                        const std::string& reduction = "mean");
Tensor dropout(const Tensor& x, double p, bool training);
Tensor gelu(const Tensor& x);

}  // namespace functional
}  // namespace nn
}  // namespace ingot
INGOT_API_END
