// One CUDA Session run from 8 threads at once on the real models (tests/unit/concurrency_util.h):
// runs on one device enqueue in turn, the plans' arenas and CUDA graphs serve one run at a time, and
// every output equals the single-threaded run's. scripts/gpu-test.sh points INGOT_MODEL_CACHE at the
// bundle's models.
#include "../unit/concurrency_util.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

TEST(CudaConcurrency, OneSessionFromEightThreadsMatchesSingleThreadedRuns) {
  INGOT_REQUIRE_GPU();
  SessionOptions options;
  options.device = Device{DeviceType::CUDA, 0};
  options.report_fallbacks = false;
  int models = ingot::testing::run_models_concurrently(options, 8, 3, 1e-4);
  if (models == 0) GTEST_SKIP() << "no real models under " << ingot::testing::model_cache();
}

}  // namespace
}  // namespace ingot::gpu_test
