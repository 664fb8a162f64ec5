// Dropout seeds for compiled training steps (optim::CompiledStep): while a TracedSeeds lives on a
// thread, nn::functional::dropout takes its seed from `base` (an int64 scalar the compiled step gets
// as an argument, new every call) and a stream of its own (ai.ingot.Dropout's seed attribute with
// input 1, ops/semantics/dropout_args.h), instead of drawing it on the host (a traced host seed
// would be one constant, the same mask every step). No arithmetic on the seed enters the graph, so
// on a GPU it stays a device input of the captured step.
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
  struct Seed {
    Tensor base;
    int64_t stream;
  };
  Seed next();  // the base and a stream of its own per call

 private:
  Tensor base_;
  int64_t count_ = 0;
  TracedSeeds* previous_;
};

}  // namespace ingot::nn::detail
