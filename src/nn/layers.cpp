// nn layers (include/ingot/nn.h): each forward is catalogue ops through ops::call, so it records on
// the tape, traces under compile and runs on any backend. Initialisation follows PyTorch's defaults
// (reset_parameters of each torch.nn module).
#include <ingot/autograd.h>
#include <ingot/nn.h>
#include <ingot/ops.h>

#include <cmath>

#include "nn/constants.h"
#include "nn/traced_seeds.h"

namespace ingot::nn {
namespace {

using Ints = std::vector<int64_t>;
constexpr const char* kIngotDomainName = "ai.ingot";

Tensor call1(const std::string& op, const std::vector<Tensor>& in, const Attributes& attrs = {}) {
  return ops::call(op, in, attrs, 1).at(0);
}

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias) {
  if (in_features <= 0 || out_features <= 0) fail("Linear({}, {}): sizes must be positive", in_features, out_features);
  const double bound = 1.0 / std::sqrt(double(in_features));
  weight = uniform({out_features, in_features}, bound);
  register_parameter("weight", weight);
  if (with_bias) {
    bias = uniform({out_features}, bound);
    register_parameter("bias", bias);
  }
}

Tensor Linear::forward(const Tensor& x) {
  const int64_t in = weight.dim(1), out = weight.dim(0);
  if (x.rank() < 1 || x.dim(-1) != in) fail("Linear({}, {}): input {} does not end in {}", in, out, x.describe(), in);
  if (x.rank() != 2) {
    // A product over the last axis (no Reshape to the batch's shape, so a traced forward stays
    // valid for any leading dims).
    Tensor y = ops::matmul(x, ops::transpose(weight, {1, 0}));
    return bias.defined() ? ops::add(y, bias) : y;
  }
  std::vector<Tensor> args{x, weight};
  if (bias.defined()) args.push_back(bias);
  return call1("Gemm", args, {{"transB", int64_t(1)}});
}

Conv::Conv(int spatial_dims, int64_t in_channels, int64_t out_channels, int64_t kernel_size, ConvOptions options)
    : dims_(spatial_dims), options_(options) {
  if (options.groups < 1 || in_channels % options.groups || out_channels % options.groups)
    fail("Conv{}d({}, {}): groups {} must divide both channel counts", spatial_dims, in_channels, out_channels, options.groups);
  Shape shape{out_channels, in_channels / options.groups};
  double fan_in = double(in_channels / options.groups);
  for (int d = 0; d < spatial_dims; ++d) {
    shape.push_back(kernel_size);
    fan_in *= double(kernel_size);
  }
  const double bound = 1.0 / std::sqrt(fan_in);
  weight = uniform(shape, bound);
  register_parameter("weight", weight);
  if (options.bias) {
    bias = uniform({out_channels}, bound);
    register_parameter("bias", bias);
  }
}

Tensor Conv::forward(const Tensor& x) {
  if (x.rank() != dims_ + 2) fail("Conv{}d: expected an input [N, C, ...] of rank {}, got {}", dims_, dims_ + 2, x.describe());
  ops::ConvOptions o;
  o.strides.assign(size_t(dims_), options_.stride);
  o.pads.assign(size_t(2 * dims_), options_.padding);
  o.dilations.assign(size_t(dims_), options_.dilation);
  o.group = options_.groups;
  return ops::conv(x, weight, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt, o);
}

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                 ConvTransposeOptions options)
    : options_(options) {
  if (options.groups < 1 || in_channels % options.groups || out_channels % options.groups)
    fail("ConvTranspose2d({}, {}): groups {} must divide both channel counts", in_channels, out_channels, options.groups);
  // PyTorch's fan_in for this layout is weight.size(1) * k * k.
  const double bound = 1.0 / std::sqrt(double(out_channels / options.groups * kernel_size * kernel_size));
  weight = uniform({in_channels, out_channels / options.groups, kernel_size, kernel_size}, bound);
  register_parameter("weight", weight);
  if (options.bias) {
    bias = uniform({out_channels}, bound);
    register_parameter("bias", bias);
  }
}

Tensor ConvTranspose2d::forward(const Tensor& x) {
  if (x.rank() != 4) fail("ConvTranspose2d: expected an input [N, C, H, W], got {}", x.describe());
  const int64_t s = options_.stride, p = options_.padding, op = options_.output_padding, d = options_.dilation;
  std::vector<Tensor> args{x, weight};
  if (bias.defined()) args.push_back(bias);
  return call1("ConvTranspose", args,
               {{"strides", Ints{s, s}}, {"pads", Ints{p, p, p, p}}, {"output_padding", Ints{op, op}},
                {"dilations", Ints{d, d}}, {"group", options_.groups}});
}

BatchNorm::BatchNorm(int64_t num_features, BatchNormOptions options) : options_(options) {
  if (options.affine) {
    weight = filled({num_features}, 1.0f);
    bias = filled({num_features}, 0.0f);
    register_parameter("weight", weight);
    register_parameter("bias", bias);
  }
  if (options.track_running_stats) {
    running_mean = filled({num_features}, 0.0f);
    running_var = filled({num_features}, 1.0f);
    num_batches_tracked = Tensor::scalar<int64_t>(0);
    register_buffer("running_mean", running_mean);
    register_buffer("running_var", running_var);
    register_buffer("num_batches_tracked", num_batches_tracked);
  }
}

Tensor BatchNorm::forward(const Tensor& x) {
  const int64_t c = running_mean.defined() ? running_mean.numel() : weight.numel();
  if (x.rank() < 2 || x.dim(1) != c) fail("BatchNorm({}): expected an input [N, {}, ...], got {}", c, c, x.describe());
  Tensor scale = weight.defined() ? weight : constant_vector(c, 1.0, x);
  Tensor shift = bias.defined() ? bias : constant_vector(c, 0.0, x);
  const bool batch_stats = is_training() || !running_mean.defined();
  const double eps = options_.eps, m = options_.momentum;
  if (!batch_stats) {
    return call1("BatchNormalization", {x, scale, shift, running_mean, running_var}, {{"epsilon", float(eps)}});
  }
  Tensor mean = running_mean.defined() ? running_mean : constant_vector(c, 0.0, x);
  Tensor var = running_var.defined() ? running_var : constant_vector(c, 1.0, x);
  // ONNX's momentum weighs the running value (PyTorch's the batch's), and its running variance
  // blends in the biased batch variance where PyTorch blends the unbiased one: corrected below.
  std::vector<Tensor> out = ops::call("BatchNormalization", {x, scale, shift, mean, var},
                                      {{"epsilon", float(eps)}, {"momentum", float(1.0 - m)}, {"training_mode", int64_t(1)}}, 3);
  if (running_mean.defined() && !(std::isnan(m))) {
    autograd::NoGradGuard no_grad;
    const int64_t count = x.numel() / c;
    running_mean = out[1];
    if (count > 1 && m > 0) {
      // out[2] = (1 - m) v + m b with b biased; PyTorch's: (1 - m) v + m b n / (n - 1).
      const double k = 1.0 / double(count - 1);
      running_var = ops::sub(ops::mul(out[2], scalar_like(1.0 + k, out[2])), ops::mul(running_var, scalar_like((1.0 - m) * k, out[2])));
    } else {
      running_var = out[2];
    }
    // An op where the buffer lives (no wait for a device; a compiled step traces it).
    num_batches_tracked = ops::add(num_batches_tracked, scalar_like(1.0, num_batches_tracked));
  }
  return out[0];
}

LayerNorm::LayerNorm(std::vector<int64_t> normalized_shape, double eps, bool elementwise_affine)
    : shape_(std::move(normalized_shape)), eps_(eps) {
  if (shape_.empty()) fail("LayerNorm: normalized_shape is empty");
  if (elementwise_affine) {
    weight = filled(shape_, 1.0f);
    bias = filled(shape_, 0.0f);
    register_parameter("weight", weight);
    register_parameter("bias", bias);
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  const int64_t k = int64_t(shape_.size());
  if (x.rank() < k || !std::equal(shape_.begin(), shape_.end(), x.shape().end() - k))
    fail("LayerNorm({}): input {} does not end in that shape", shape_str(shape_), x.describe());
  Tensor scale = weight, shift = bias;
  if (!scale.defined()) {
    scale = ops::reshape(constant_vector(shape_numel(shape_), 1.0, x), shape_);
    shift = ops::reshape(constant_vector(shape_numel(shape_), 0.0, x), shape_);
  }
  return ops::call("LayerNormalization", {x, scale, shift}, {{"axis", -k}, {"epsilon", float(eps_)}}, 1).at(0);
}

GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, double eps, bool affine)
    : groups_(num_groups), channels_(num_channels), eps_(eps) {
  if (num_groups < 1 || num_channels % num_groups)
    fail("GroupNorm({}, {}): the groups must divide the channels", num_groups, num_channels);
  if (affine) {
    weight = filled({num_channels}, 1.0f);
    bias = filled({num_channels}, 0.0f);
    register_parameter("weight", weight);
    register_parameter("bias", bias);
  }
}

Tensor GroupNorm::forward(const Tensor& x) {
  if (x.rank() < 2 || x.dim(1) != channels_) fail("GroupNorm: expected [N, {}, ...], got {}", channels_, x.describe());
  Tensor scale = weight.defined() ? weight : constant_vector(channels_, 1.0, x);
  Tensor shift = bias.defined() ? bias : constant_vector(channels_, 0.0, x);
  return call1("GroupNormalization", {x, scale, shift}, {{"num_groups", groups_}, {"epsilon", float(eps_)}});
}

Dropout::Dropout(double p) : p_(p) {
  if (!(p >= 0 && p < 1)) fail("Dropout({}): p must be in [0, 1)", p);
}
Tensor Dropout::forward(const Tensor& x) { return functional::dropout(x, p_, is_training()); }

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim) {
  weight = normal({num_embeddings, embedding_dim});
  register_parameter("weight", weight);
}
Tensor Embedding::forward(const Tensor& indices) { return call1("Gather", {weight, indices}, {{"axis", int64_t(0)}}); }

Tensor ReLU::forward(const Tensor& x) { return ops::relu(x); }
Tensor LeakyReLU::forward(const Tensor& x) { return call1("LeakyRelu", {x}, {{"alpha", float(slope_)}}); }
Tensor GELU::forward(const Tensor& x) { return functional::gelu(x); }
Tensor SiLU::forward(const Tensor& x) { return ops::mul(x, ops::sigmoid(x)); }
Tensor Sigmoid::forward(const Tensor& x) { return ops::sigmoid(x); }
Tensor Tanh::forward(const Tensor& x) { return ops::tanh(x); }

Tensor Flatten::forward(const Tensor& x) {
  const int64_t start = normalize_axis(start_, std::max<int64_t>(x.rank(), 1), "Flatten start_dim");
  // Leading dims as 0 (ONNX: copy the input's), so that a traced graph holds no batch size.
  Shape shape(size_t(start), 0);
  shape.push_back(-1);
  return ops::reshape(x, shape);
}

MaxPool2d::MaxPool2d(int64_t kernel_size, int64_t stride, int64_t padding)
    : kernel_(kernel_size), stride_(stride > 0 ? stride : kernel_size), padding_(padding) {}
Tensor MaxPool2d::forward(const Tensor& x) {
  const Attributes attrs{{"kernel_shape", Ints{kernel_, kernel_}},
                         {"strides", Ints{stride_, stride_}},
                         {"pads", Ints{padding_, padding_, padding_, padding_}}};
  // Where a gradient will be taken, the Indices output too: MaxPool's rule routes dy through them
  // instead of pooling again in the backward.
  if (autograd::grad_enabled() && x.requires_grad()) return ops::call("MaxPool", {x}, attrs, 2).at(0);
  return call1("MaxPool", {x}, attrs);
}

AvgPool2d::AvgPool2d(int64_t kernel_size, int64_t stride, int64_t padding)
    : kernel_(kernel_size), stride_(stride > 0 ? stride : kernel_size), padding_(padding) {}
Tensor AvgPool2d::forward(const Tensor& x) {
  const int64_t p = padding_;
  return call1("AveragePool", {x},
               {{"kernel_shape", Ints{kernel_, kernel_}}, {"strides", Ints{stride_, stride_}}, {"pads", Ints{p, p, p, p}},
                {"count_include_pad", int64_t(1)}});  // PyTorch's default
}

Tensor GlobalAvgPool::forward(const Tensor& x) { return call1("GlobalAveragePool", {x}); }

namespace functional {

Tensor dropout(const Tensor& x, double p, bool training) {
  if (!training || p == 0.0) return x;
  if (!(p > 0 && p < 1)) fail("dropout: p must be in [0, 1), got {}", p);
  if (detail::TracedSeeds* seeds = detail::TracedSeeds::active()) {  // a compiled step: the seed is an input
    const detail::TracedSeeds::Seed s = seeds->next();
    return ops::call("Dropout", {x, s.base}, {{"ratio", float(p)}, {"seed", s.stream}}, 2, kIngotDomainName).at(0);
  }
  const int64_t seed = int64_t(random_u64() >> 1);
  return ops::call("Dropout", {x}, {{"ratio", float(p)}, {"seed", seed}}, 2, kIngotDomainName).at(0);
}

Tensor gelu(const Tensor& x) {  // x/2 (1 + erf(x / sqrt 2))
  Tensor e = call1("Erf", {ops::mul(x, scalar_like(M_SQRT1_2, x))});
  return ops::mul(ops::mul(x, scalar_like(0.5, x)), ops::add(e, scalar_like(1.0, x)));
}

}  // namespace functional
}  // namespace ingot::nn
