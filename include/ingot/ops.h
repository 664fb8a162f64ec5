// Eager op calls on tensors. Every call goes through the same op catalogue and kernels as graph
// execution (ops::call is the boxed entry point; the named functions are typed conveniences).
#pragma once
#include <ingot/export.h>
#include <ingot/attribute.h>
#include <ingot/tensor.h>

#include <optional>
#include <string>
#include <vector>

INGOT_API_BEGIN
namespace ingot::ops {

// Runs any catalogue op. `inputs` may hold undefined tensors for omitted optional inputs. `opset` is the
// version of the op's domain to run with (a model's, as constant folding does); 0: the newest.
std::vector<Tensor> call(const std::string& op, const std::vector<Tensor>& inputs, const Attributes& attrs = {},
                         int num_outputs = -1, const std::string& domain = "", int opset = 0);

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm = {});
Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape);
Tensor concat(const std::vector<Tensor>& xs, int64_t axis);
Tensor reduce_sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims = true);
Tensor reduce_mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims = true);

struct ConvOptions {
  std::vector<int64_t> strides, pads, dilations;  // empty: ONNX defaults
  int64_t group = 1;
  std::string auto_pad = "NOTSET";
};
Tensor conv(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias = std::nullopt,
            const ConvOptions& options = {});

struct PoolOptions {
  std::vector<int64_t> kernel_shape, strides, pads;
  bool ceil_mode = false;
};
Tensor max_pool(const Tensor& x, const PoolOptions& options);
Tensor average_pool(const Tensor& x, const PoolOptions& options);

}  // namespace ingot::ops
INGOT_API_END
