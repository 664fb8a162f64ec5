// ingot-vad: finds speech in a recording with the Silero voice-activity detector, streamed window by
// window with its recurrent state carried, using only Ingot's public API. The model comes from
// scripts/fetch-models.sh and is converted into a package on first use (apps/common/package_cache.h).
//
//   ingot-vad AUDIO.wav [--device cpu|cuda] [--threshold 0.5] [--json FILE] [--plot FILE.png] ...
#include <ingot/session.h>
#include <ingot/tensor.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/package_cache.h"
#include "../common/plot.h"
#include "audio.h"
#include "speech.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Silero VAD v5 as its reference wrapper (OnnxWrapper) streams it: windows of 512 samples at
// 16 kHz (256 at 8 kHz), each fed with the previous window's last 64 (32) samples in front, the
// state [2, 1, 128] carried from one call to the next.
class Silero {
 public:
  explicit Silero(ingot::Session session) : session_(std::move(session)) {
    auto has = [&](const std::vector<ingot::TensorInfo>& list, const std::string& name) {
      return std::any_of(list.begin(), list.end(), [&](const ingot::TensorInfo& t) { return t.name == name; });
    };
    if (!has(session_.inputs(), "input") || !has(session_.inputs(), "state") || !has(session_.inputs(), "sr")) {
      throw std::runtime_error("'" + session_.model_name() +
                               "' is not a Silero VAD v5 model (expected inputs input, state, sr)");
    }
  }

  static int window_for(int sample_rate) { return sample_rate == 16000 ? 512 : 256; }

  // Speech probability of each window (the last one zero-padded); `window_ms` gets each window's time.
  std::vector<float> probabilities(const std::vector<float>& samples, int sample_rate, std::vector<double>& window_ms) {
    const int window = window_for(sample_rate), context = sample_rate == 16000 ? 64 : 32;
    std::vector<float> input(size_t(context + window), 0.0f), state(2 * 1 * 128, 0.0f);
    const ingot::Tensor sr = ingot::Tensor::scalar<int64_t>(sample_rate);
    std::vector<float> probs;
    for (size_t start = 0; start < samples.size(); start += size_t(window)) {
      const auto t = Clock::now();
      std::copy(input.end() - context, input.end(), input.begin());  // last window's tail
      const size_t n = std::min(size_t(window), samples.size() - start);
      std::copy_n(samples.begin() + long(start), n, input.begin() + context);
      std::fill(input.begin() + context + long(n), input.end(), 0.0f);
      std::vector<ingot::Tensor> out = session_.run(
          {{"input", ingot::Tensor::wrap(ingot::DType::Float32, {1, context + window}, input.data())},
           {"state", ingot::Tensor::wrap(ingot::DType::Float32, {2, 1, 128}, state.data())},
           {"sr", sr}});
      if (out.size() != 2 || out[0].numel() != 1 || out[1].numel() != int64_t(state.size())) {
        throw std::runtime_error("'" + session_.model_name() + "' returned unexpected outputs");
      }
      probs.push_back(out[0].to_vector<float>()[0]);
      state = out[1].to_vector<float>();
      window_ms.push_back(ms_since(t));
    }
    return probs;
  }

 private:
  ingot::Session session_;
};

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Finds speech in a recording with the Silero voice-activity detector on Ingot"};
  std::string audio_path, device = "cpu", package_dir = apps::package_cache_dir(),
                          model = apps::model_cache_dir() + "/silero-vad/weights/silero_vad.onnx", json_path, plot_path;
  int threads = 1;
  vad::SpeechParams params;
  app.add_option("audio", audio_path, "WAV file (PCM or float; resampled to 16 kHz unless 8 or 16 kHz)")->required();
  app.add_option("--device", device, "cpu or cuda[:N]");
  app.add_option("--threshold", params.threshold, "Speech probability that starts a segment")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--neg-threshold", params.neg_threshold, "Probability below which speech ends (default threshold - 0.15)");
  app.add_option("--min-speech-ms", params.min_speech_ms, "Shorter segments are dropped")->capture_default_str();
  app.add_option("--min-silence-ms", params.min_silence_ms, "Silence that ends a segment")->capture_default_str();
  app.add_option("--speech-pad-ms", params.speech_pad_ms, "Padding on each side of a segment")->capture_default_str();
  app.add_option("--max-speech-s", params.max_speech_s, "Longer segments are split (default: no limit)");
  app.add_option("--json", json_path, "Write the segments and the per-window probabilities as JSON");
  app.add_option("--plot", plot_path, "Write the probability over time with the segments shaded (PNG)");
  app.add_option("--model", model, "Silero VAD v5 ONNX model (scripts/fetch-models.sh)")->capture_default_str();
  app.add_option("--package-dir", package_dir, "Where converted packages are cached")->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (0: all; one window is too small to share)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    const auto start = Clock::now();
    vad::Audio audio = vad::read_wav(audio_path);
    const int original_rate = audio.sample_rate;
    if (audio.sample_rate != 8000 && audio.sample_rate != 16000) {
      audio.samples = vad::resample(audio.samples, audio.sample_rate, 16000);
      audio.sample_rate = 16000;
    }
    const double read_ms = ms_since(start);

    apps::require_file(model, "run scripts/fetch-models.sh, or pass --model");
    ingot::SessionOptions options;
    options.device = ingot::Device::parse(device);
    options.threads = threads;
    // On a GPU, the one shape each window runs at is measured at conversion (tuning shapes).
    const int64_t window_with_context = Silero::window_for(audio.sample_rate) + (audio.sample_rate == 16000 ? 64 : 32);
    apps::CachedSession cached = apps::load_cached(
        model, package_dir, options, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); },
        {{{"input", {1, window_with_context}}, {"state", {2, 1, 128}}}});
    Silero silero(std::move(cached.session));

    const auto t = Clock::now();
    std::vector<double> window_ms;
    const std::vector<float> probs = silero.probabilities(audio.samples, audio.sample_rate, window_ms);
    const double vad_ms = ms_since(t);
    double later_ms = 0;  // median window after the first (which loads kernels, builds plans)
    if (window_ms.size() > 1) {
      std::vector<double> v(window_ms.begin() + 1, window_ms.end());
      std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
      later_ms = v[v.size() / 2];
    }
    const int window = Silero::window_for(audio.sample_rate);
    const std::vector<vad::Segment> segments =
        vad::speech_segments(probs, window, audio.sample_rate, int64_t(audio.samples.size()), params);

    const double rate = audio.sample_rate;
    double speech = 0;
    for (size_t i = 0; i < segments.size(); ++i) {
      const double a = double(segments[i].start) / rate, b = double(segments[i].end) / rate;
      speech += b - a;
      std::printf("segment %zu: %s - %s s\n", i, seconds(a).c_str(), seconds(b).c_str());
    }
    std::printf("%s: %.2f s at %d Hz%s, %zu segment%s, %.2f s of speech\n", audio_path.c_str(), audio.seconds(),
                original_rate, original_rate != audio.sample_rate ? " (resampled to 16000)" : "", segments.size(),
                segments.size() == 1 ? "" : "s", speech);
    std::printf("time: read %.1f ms, load %.1f ms (%s), vad %.1f ms (%zu windows: the first %.2f ms, then %.3f ms "
                "median; %.0fx real time)\n",
                read_ms, cached.load_ms, cached.converted ? "converted" : "package", vad_ms, probs.size(),
                window_ms.empty() ? 0.0 : window_ms[0], later_ms, audio.seconds() * 1000.0 / std::max(vad_ms, 1e-9));

    if (!json_path.empty()) {
      nlohmann::json out{{"audio", audio_path},
                         {"sample_rate", audio.sample_rate},
                         {"seconds", audio.seconds()},
                         {"window_samples", window},
                         {"segments", nlohmann::json::array()},
                         {"probabilities", probs}};
      for (const vad::Segment& s : segments) {
        out["segments"].push_back({{"start", double(s.start) / rate},
                                   {"end", double(s.end) / rate},
                                   {"start_sample", s.start},
                                   {"end_sample", s.end}});
      }
      std::ofstream file(json_path);
      file << out.dump(1) << "\n";
      if (!file) throw std::runtime_error("cannot write '" + json_path + "'");
    }
    if (!plot_path.empty()) {
      std::vector<apps::plot::Interval> shaded;
      for (const vad::Segment& s : segments) shaded.push_back({double(s.start) / rate, double(s.end) / rate});
      const std::string title = "speech probability: " + std::filesystem::path(audio_path).filename().string();
      apps::plot::save_timeline_png(plot_path, title, double(window) / rate, std::vector<double>(probs.begin(), probs.end()),
                                    shaded, params.threshold);
      std::printf("wrote %s\n", plot_path.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
