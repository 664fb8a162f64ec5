// Speech segments from per-window speech probabilities: silero-vad's get_speech_timestamps
// (utils_vad.py, v5), the post-processing its users compare with.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace vad {

struct SpeechParams {
  float threshold = 0.5f;       // a window at or above it is speech
  float neg_threshold = -1;     // speech ends below it; < 0: max(threshold - 0.15, 0.01)
  int min_speech_ms = 250;      // shorter segments are dropped
  int min_silence_ms = 100;     // silence that ends a segment
  int speech_pad_ms = 30;       // padding on each side (halved between close segments)
  double max_speech_s = std::numeric_limits<double>::infinity();  // longer segments are split
};

struct Segment {
  int64_t start = 0, end = 0;  // samples
};

// `probs[i]` is the probability of window i (samples [i * window, (i + 1) * window)).
std::vector<Segment> speech_segments(const std::vector<float>& probs, int window, int sample_rate,
                                     int64_t total_samples, const SpeechParams& params);

}  // namespace vad
