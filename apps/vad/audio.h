// Audio for ingot-vad: RIFF WAVE files read as mono float samples, and resampling.
#pragma once

#include <string>
#include <vector>

namespace vad {

struct Audio {
  int sample_rate = 0;
  std::vector<float> samples;  // mono, in [-1, 1]
  double seconds() const { return sample_rate ? double(samples.size()) / sample_rate : 0.0; }
};

// PCM 8/16/24/32-bit integer or 32/64-bit IEEE float, plain or WAVE_FORMAT_EXTENSIBLE; channels are
// averaged. Throws std::runtime_error naming the file and what is wrong with it.
Audio read_wav(const std::string& path);

// Band-limited resampling (Hann-windowed sinc, 16 zero crossings, cut off at 0.95 x the lower
// Nyquist frequency).
std::vector<float> resample(const std::vector<float>& samples, int from_rate, int to_rate);

}  // namespace vad
