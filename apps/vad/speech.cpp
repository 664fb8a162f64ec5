#include "speech.h"

#include <algorithm>
#include <cmath>

namespace vad {

std::vector<Segment> speech_segments(const std::vector<float>& probs, int window, int sample_rate,
                                     int64_t total_samples, const SpeechParams& params) {
  const double rate = sample_rate;
  const double min_speech = rate * params.min_speech_ms / 1000.0;
  const double pad = rate * params.speech_pad_ms / 1000.0;
  const double max_speech = rate * params.max_speech_s - window - 2 * pad;
  const double min_silence = rate * params.min_silence_ms / 1000.0;
  const double min_silence_at_max_speech = rate * 98 / 1000.0;
  const float neg = params.neg_threshold >= 0 ? params.neg_threshold : std::max(params.threshold - 0.15f, 0.01f);

  std::vector<Segment> speeches;
  bool triggered = false, open = false;  // open: `current` has a start
  Segment current;
  int64_t temp_end = 0, prev_end = 0, next_start = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const float p = probs[i];
    const int64_t at = int64_t(i) * window;
    if (p >= params.threshold && temp_end) {
      temp_end = 0;
      if (next_start < prev_end) next_start = at;
    }
    if (p >= params.threshold && !triggered) {
      triggered = true;
      current = {at, 0};
      open = true;
      continue;
    }
    if (triggered && double(at - current.start) > max_speech) {
      if (prev_end) {
        current.end = prev_end;
        speeches.push_back(current);
        open = false;
        if (next_start < prev_end) {
          triggered = false;
        } else {
          current = {next_start, 0};
          open = true;
        }
        prev_end = next_start = temp_end = 0;
      } else {
        current.end = at;
        speeches.push_back(current);
        open = false;
        prev_end = next_start = temp_end = 0;
        triggered = false;
        continue;
      }
    }
    if (p < neg && triggered) {
      if (!temp_end) temp_end = at;
      if (double(at - temp_end) > min_silence_at_max_speech) prev_end = temp_end;
      if (double(at - temp_end) < min_silence) continue;
      current.end = temp_end;
      if (double(current.end - current.start) > min_speech) speeches.push_back(current);
      open = false;
      prev_end = next_start = temp_end = 0;
      triggered = false;
    }
  }
  if (open && double(total_samples - current.start) > min_speech) {
    current.end = total_samples;
    speeches.push_back(current);
  }

  for (size_t i = 0; i < speeches.size(); ++i) {
    Segment& s = speeches[i];
    if (i == 0) s.start = int64_t(std::max(0.0, double(s.start) - pad));
    if (i + 1 < speeches.size()) {
      Segment& next = speeches[i + 1];
      const int64_t silence = next.start - s.end;
      if (double(silence) < 2 * pad) {
        s.end += silence / 2;
        next.start = std::max<int64_t>(0, next.start - silence / 2);
      } else {
        s.end = int64_t(std::min(double(total_samples), double(s.end) + pad));
        next.start = int64_t(std::max(0.0, double(next.start) - pad));
      }
    } else {
      s.end = int64_t(std::min(double(total_samples), double(s.end) + pad));
    }
  }
  return speeches;
}

}  // namespace vad
