// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, as every backend's kernels see them: the
// scores [N, C, d1...] as [N, C, D] (D = product of the trailing dims), the target as [N, D], the
// optional class weights [C]; checked here once, with the messages users see.
//   loss[n, d] = -w * logp[n, target[n, d], d], w = weight[target] (1 without weights, 0 where
//   target == ignore_index); reduction none: loss; sum: sum(loss); mean: sum(loss) / sum(w).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "ops/kernel.h"

namespace ingot::sem {

struct LossArgs {
  int64_t n = 0, c = 0, d = 1;
  std::optional<int64_t> ignore_index;
  std::string reduction;  // none, sum or mean
};

// `scores_name`: how input 0 is called in messages ("input" for NLL, "scores" for cross-entropy).
LossArgs loss_args(const KernelContext& ctx, const char* scores_name);

}  // namespace ingot::sem
