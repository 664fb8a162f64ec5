// One Session run from many threads at once on the real models: every output of every concurrent run
// must equal the single-threaded run's, bit for bit (the same kernels on the same inputs; the memory
// plan and the kernels' node state are shared, so a race shows as a wrong value). The models come
// from the model cache (scripts/fetch-models.sh; INGOT_MODEL_CACHE); without them the tests skip.
// Used by tests/unit/concurrency_test.cpp (CPU) and tests/gpu/concurrency_test.cpp (CUDA).
#pragma once
#include <gtest/gtest.h>
#include <ingot/session.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <thread>

namespace ingot::testing {

namespace fs = std::filesystem;  // NOLINT: a test header

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

inline fs::path model_cache() {
  if (const char* dir = std::getenv("INGOT_MODEL_CACHE")) return dir;
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/root") / ".cache/ingot/models";
}

inline std::optional<fs::path> find_model(const std::string& file) {
  std::error_code ec;
  if (!fs::is_directory(model_cache(), ec)) return std::nullopt;
  for (const auto& entry : fs::recursive_directory_iterator(model_cache(), ec)) {
    if (entry.path().filename() == file) return entry.path();
  }
  return std::nullopt;
}

// Inputs in [-1, 1] from `seed`; Silero's sample rate is 16000 (its If branches on it).
inline std::vector<std::pair<std::string, Tensor>> make_inputs(const ModelCase& m, uint32_t seed) {
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

inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Equal bit for bit (rtol 0), or within rtol * (1 + |expected|) per float element.
inline bool matches(const Tensor& a, const Tensor& b, double rtol) {
  if (rtol > 0 && a.dtype() == DType::Float32 && b.dtype() == DType::Float32 && a.shape() == b.shape()) {
    std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
    for (size_t i = 0; i < x.size(); ++i) {
      if (!(std::abs(double(x[i]) - double(y[i])) <= rtol * (1 + std::abs(double(y[i]))))) return false;
    }
    return true;
  }
  return same_bits(a, b);
}


// Loads each real model with `options`, runs it single-threaded on two input sets, then from
// `threads` threads at once, `runs` times each, and expects every output equal to the first runs'.
// Returns how many models were found.
// `rtol` 0: bit for bit (CPU); a GPU's library kernels may pick other reduction orders between runs.
inline int run_models_concurrently(const SessionOptions& options, int threads, int runs, double rtol = 0) {
  constexpr int kInputSets = 2;
  int models = 0;
  for (const ModelCase& m : kModels) {
    auto path = find_model(m.file);
    if (!path) continue;
    ++models;
    SCOPED_TRACE(m.file);
    Session session = Session::load(path->string(), options);
    std::vector<std::vector<std::pair<std::string, Tensor>>> feeds;
    std::vector<std::vector<Tensor>> expected;
    for (int s = 0; s < kInputSets; ++s) {
      feeds.push_back(make_inputs(m, 1234u + uint32_t(s)));
      expected.push_back(session.run(feeds.back()));
    }
    std::vector<std::string> errors(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        try {
          for (int r = 0; r < runs; ++r) {
            const int s = (t + r) % kInputSets;
            std::vector<Tensor> got = session.run(feeds[size_t(s)]);
            for (size_t o = 0; o < got.size(); ++o) {
              if (!matches(got[o], expected[size_t(s)][o], rtol) && errors[size_t(t)].empty())
                errors[size_t(t)] = "run " + std::to_string(r) + ": output " + std::to_string(o) + " differs";
            }
          }
        } catch (const std::exception& e) {
          errors[size_t(t)] = e.what();
        }
      });
    }
    for (auto& th : pool) th.join();
    for (int t = 0; t < threads; ++t) EXPECT_EQ(errors[size_t(t)], "") << "thread " << t;
  }
  return models;
}

// Many sessions at once: `threads` threads each load every real model into a Session of their own
// (import, ONNX's inference in a child process, the passes, the memory plan) and run it, and every
// output must equal a single-threaded session's. Returns how many models were found.
inline int load_models_concurrently(const SessionOptions& options, int threads, double rtol = 0) {
  std::vector<std::pair<fs::path, const ModelCase*>> found;
  for (const ModelCase& m : kModels)
    if (auto path = find_model(m.file)) found.emplace_back(*path, &m);
  std::vector<std::vector<std::pair<std::string, Tensor>>> feeds;
  std::vector<std::vector<Tensor>> expected;
  for (const auto& [path, m] : found) {
    feeds.push_back(make_inputs(*m, 99u));
    expected.push_back(Session::load(path.string(), options).run(feeds.back()));
  }
  std::vector<std::string> errors(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        for (size_t k = 0; k < found.size(); ++k) {
          const size_t i = (k + size_t(t)) % found.size();  // threads start on different models
          std::vector<Tensor> got = Session::load(found[i].first.string(), options).run(feeds[i]);
          for (size_t o = 0; o < got.size(); ++o) {
            if (!matches(got[o], expected[i][o], rtol) && errors[size_t(t)].empty())
              errors[size_t(t)] = found[i].second->file + ": output " + std::to_string(o) + " differs";
          }
        }
      } catch (const std::exception& e) {
        errors[size_t(t)] = e.what();
      }
    });
  }
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(errors[size_t(t)], "") << "thread " << t;
  return int(found.size());
}

}  // namespace ingot::testing
