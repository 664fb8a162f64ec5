// One CPU Session run from 8 threads at once on the real models, and 8 threads each loading and
// running sessions of their own (tests/unit/concurrency_util.h).
// Run under ThreadSanitizer by scripts/tsan-check.sh.
#include "concurrency_util.h"

namespace ingot {
namespace {

TEST(Concurrency, OneSessionFromEightThreadsMatchesSingleThreadedRuns) {
  // One CPU thread per run: the runs' own kernels are deterministic, and the 8 runs are the
  // parallelism under test.
  int models = testing::run_models_concurrently({.threads = 1}, 8, 3);
  if (models == 0) GTEST_SKIP() << "no real models under " << testing::model_cache() << " (scripts/fetch-models.sh)";
  EXPECT_EQ(models, int(testing::kModels.size())) << "some models are missing from " << testing::model_cache();
}

TEST(Concurrency, EightThreadsLoadingTheirOwnSessionsMatchSingleThreadedRuns) {
  int models = testing::load_models_concurrently({.threads = 1}, 8);
  if (models == 0) GTEST_SKIP() << "no real models under " << testing::model_cache() << " (scripts/fetch-models.sh)";
  EXPECT_EQ(models, int(testing::kModels.size())) << "some models are missing from " << testing::model_cache();
}

}  // namespace
}  // namespace ingot
