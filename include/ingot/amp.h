// Automatic mixed precision, after torch.amp: autocast regions and the gradient scaler.
//
//   amp::GradScaler scaler;                                  // init_scale 2^16, growth 2, backoff 0.5, interval 2000
//   for (...) {
//     opt.zero_grad();
//     Tensor loss;
//     {
//       amp::Autocast autocast(DeviceType::CUDA);            // float16 on CUDA, bfloat16 on the CPU
//       loss = nn::functional::cross_entropy(net->forward(x), y);
//     }
//     scaler.scale(loss).backward();
//     scaler.step(opt);                                      // unscales; skips the step on inf/NaN
//     scaler.update();
//   }
//
// Inside an Autocast region every op this thread calls on tensors of the region's device picks its
// precision from the op schema's tags (ops/op_def.h), as PyTorch's autocast lists do: convolutions,
// matrix products and attention (AutocastLowPrecision) cast their float32 inputs to the low dtype;
// precision-neutral ops (AutocastFollow: elementwise arithmetic, activations, data movement, pooling)
// run in the widest float dtype among their inputs; everything else (exp/log/pow, reductions,
// softmax and log-softmax, the normalizations, losses, resizing) casts 16-bit inputs to float32.
// The casts are ordinary Cast calls, so gradients flow back to float32 parameters; a parameter's cast
// is made once per region and reused. Backward passes run without autocast, in the forward's dtypes.
// docs/TRAINING.md has the table.
#pragma once
#include <ingot/export.h>
#include <ingot/tensor.h>

#include <cstdint>
#include <map>
#include <string>

INGOT_API_BEGIN
namespace ingot {
namespace optim {
class Optimizer;
}
namespace amp {

class Autocast {
 public:
  // dtype Undefined: float16 on CUDA, bfloat16 on the CPU (PyTorch's defaults).
  explicit Autocast(DeviceType device, DType dtype = DType::Undefined, bool enabled = true);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  DeviceType device_;
  bool previous_enabled_;
  DType previous_dtype_;
};
bool is_autocast_enabled(DeviceType device);
DType autocast_dtype(DeviceType device);

// How autocast treats an op (from its schema's tags): "low", "follow" or "float32"; empty for an
// op the catalogue does not have. What docs/TRAINING.md's table lists.
std::string autocast_policy(const std::string& op, const std::string& domain = "");

struct GradScalerOptions {
  double init_scale = 65536.0, growth_factor = 2.0, backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

// Loss scaling for float16 gradients (torch.amp.GradScaler): scale() multiplies the loss by the
// scale; unscale() divides every gradient of the optimizer's parameters by it and checks them for
// inf/NaN in one fused pass (ai.ingot.UnscaleGrads); step() unscales (once) and runs the optimizer
// only when every gradient was finite; update() halves the scale after an overflow and doubles it
// after growth_interval clean steps.
class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});
  Tensor scale(const Tensor& loss);
  void unscale(optim::Optimizer& optimizer);
  // Returns whether the optimizer stepped.
  bool step(optim::Optimizer& optimizer);
  void update();
  double get_scale() const { return scale_; }
  int64_t growth_tracker() const { return tracker_; }
  bool is_enabled() const { return options_.enabled; }
  std::map<std::string, double> state_dict() const;
  void load_state_dict(const std::map<std::string, double>& state);

 private:
  GradScalerOptions options_;
  double scale_;
  int64_t tracker_ = 0;
  bool unscaled_ = false, found_inf_ = false, stepped_since_update_ = false;
  Tensor found_;  // the inf/NaN flag of this step's unscale, on the gradients' device
};

}  // namespace amp
}  // namespace ingot
INGOT_API_END
