// Dropout seeds for compiled training steps (optim::CompiledStep): while a TracedSeeds lives on a
// thread, nn::functional::dropout takes its seed from `base` (an int64 scalar the compiled step gets
// as an argument, new every call) plus a per-call offset, as ops the trace records, instead of
// drawing it on the host (a traced host seed would be one constant, the same mask every step).
#pragma once
#include <ingot/tensor.h>

namespace ingot::nn::detail {

class TracedSeeds {
 public:
  explicit TracedSeeds(Tensor base);
  ~TracedSeeds();
  TracedSeeds(const TracedSeeds&) = delete;
  TracedSeeds& operator=(const TracedSeeds&) = delete;
  static TracedSeeds* active();  // on this thread, or nullptr
  Tensor next();                 // base + a distinct offset per call

 private:
  Tensor base_;
  int64_t count_ = 0;
  TracedSeeds* previous_;
};

}  // namespace ingot::nn::detail
