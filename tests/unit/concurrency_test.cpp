// One Session run from 8 threads at once on the real models (CPU): every output of every concurrent
// run equals the single-threaded run's, bit for bit (the same kernels on the same inputs; the memory
// plan and the kernels' node state are shared, so a race shows as a wrong value). The models come
// from the model cache (scripts/fetch-models.sh); without them the test is skipped. Run under
// ThreadSanitizer by scripts/tsan-check.sh.
#include <gtest/gtest.h>
#include <ingot/session.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

namespace ingot {
namespace {

namespace fs = std::filesystem;

struct InputSpec {
  std::string name;
  DType dtype;
  Shape shape;
};
struct ModelCase {
  std::string file;  // under the model cache (any folder)
  std::vector<InputSpec> inputs;
};

// The shapes tests/models/make_inputs.py gives these models.
const std::vector<ModelCase> kModels = {
    {"ch_PP-OCRv4_det_infer.onnx", {{"x", DType::Float32, {1, 3, 192, 384}}}},
    {"ch_PP-OCRv4_rec_infer.onnx", {{"x", DType::Float32, {1, 3, 48, 320}}}},
    {"ch_ppocr_mobile_v2.0_cls_infer.onnx", {{"x", DType::Float32, {1, 3, 48, 192}}}},
    {"face_detection_front_128x128_barracuda.onnx", {{"input:0", DType::Float32, {1, 128, 128, 3}}}},
    {"face_detection_back_256x256_barracuda.onnx", {{"input:0", DType::Float32, {1, 256, 256, 3}}}},
    {"silero_vad.onnx",
     {{"input", DType::Float32, {1, 576}}, {"state", DType::Float32, {2, 1, 128}}, {"sr", DType::Int64, {}}}},
};

fs::path model_cache() {
  if (const char* dir = std::getenv("INGOT_MODEL_CACHE")) return dir;
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/root") / ".cache/ingot/models";
}

std::optional<fs::path> find_model(const std::string& file) {
  std::error_code ec;
  if (!fs::is_directory(model_cache(), ec)) return std::nullopt;
  for (const auto& entry : fs::recursive_directory_iterator(model_cache(), ec)) {
    if (entry.path().filename() == file) return entry.path();
  }
  return std::nullopt;
}

// Inputs in [-1, 1] from `seed`; Silero's sample rate is 16000 (its If branches on it).
std::vector<std::pair<std::string, Tensor>> make_inputs(const ModelCase& m, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const InputSpec& in : m.inputs) {
    if (in.dtype == DType::Int64) {
      feeds.emplace_back(in.name, Tensor::scalar<int64_t>(16000));
      continue;
    }
    std::vector<float> values(size_t(shape_numel(in.shape)));
    for (float& v : values) v = uniform(rng);
    feeds.emplace_back(in.name, Tensor::from_vector(values, in.shape));
  }
  return feeds;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

TEST(Concurrency, OneSessionFromEightThreadsMatchesSingleThreadedRuns) {
  constexpr int kThreads = 8, kRunsPerThread = 3, kInputSets = 2;
  int models = 0;
  for (const ModelCase& m : kModels) {
    auto path = find_model(m.file);
    if (!path) continue;
    ++models;
    SCOPED_TRACE(m.file);
    // One CPU thread per run: the runs' own kernels are deterministic, and the 8 runs are the
    // parallelism under test.
    Session session = Session::load(path->string(), {.threads = 1});
    std::vector<std::vector<std::pair<std::string, Tensor>>> feeds;
    std::vector<std::vector<Tensor>> expected;
    for (int s = 0; s < kInputSets; ++s) {
      feeds.push_back(make_inputs(m, 1234u + uint32_t(s)));
      expected.push_back(session.run(feeds.back()));
    }
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        try {
          for (int r = 0; r < kRunsPerThread; ++r) {
            const int s = (t + r) % kInputSets;
            std::vector<Tensor> got = session.run(feeds[size_t(s)]);
            for (size_t o = 0; o < got.size(); ++o) {
              if (!same_bits(got[o], expected[size_t(s)][o]) && errors[size_t(t)].empty())
                errors[size_t(t)] = "run " + std::to_string(r) + ": output " + std::to_string(o) + " differs";
            }
          }
        } catch (const std::exception& e) {
          errors[size_t(t)] = e.what();
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[size_t(t)], "") << "thread " << t;
  }
  if (models == 0) GTEST_SKIP() << "no real models under " << model_cache() << " (scripts/fetch-models.sh)";
  EXPECT_EQ(models, int(kModels.size())) << "some models are missing from " << model_cache();
}

}  // namespace
}  // namespace ingot
