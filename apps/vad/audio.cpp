#include "audio.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numbers>
#include <stdexcept>

namespace vad {
namespace {

uint32_t u32(const unsigned char* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
uint16_t u16(const unsigned char* p) { return uint16_t(p[0] | p[1] << 8); }

}  // namespace

Audio read_wav(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open audio file '" + path + "': " + std::strerror(errno));
  const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto fail = [&](const std::string& why) -> void { throw std::runtime_error("'" + path + "' " + why); };
  if (bytes.size() < 12 || std::memcmp(bytes.data(), "RIFF", 4) != 0 || std::memcmp(bytes.data() + 8, "WAVE", 4) != 0) {
    fail("is not a WAV file (no RIFF/WAVE header)");
  }
  int format = -1, channels = 0, rate = 0, bits = 0;
  const unsigned char* data = nullptr;
  size_t data_size = 0;
  for (size_t pos = 12; pos + 8 <= bytes.size();) {
    const unsigned char* chunk = bytes.data() + pos;
    const size_t size = u32(chunk + 4);
    const size_t available = std::min(size, bytes.size() - pos - 8);
    if (std::memcmp(chunk, "fmt ", 4) == 0) {
      if (available < 16) fail("has a truncated fmt chunk");
      format = u16(chunk + 8);
      channels = u16(chunk + 10);
      rate = int(u32(chunk + 12));
      bits = u16(chunk + 22);
      if (format == 0xFFFE) {  // WAVE_FORMAT_EXTENSIBLE: the format is the sub-format GUID's first two bytes
        if (available < 40) fail("has a truncated WAVE_FORMAT_EXTENSIBLE fmt chunk");
        format = u16(chunk + 32);
      }
    } else if (std::memcmp(chunk, "data", 4) == 0) {
      data = chunk + 8;
      data_size = available;  // a truncated file keeps what it has
      break;
    }
    pos += 8 + size + (size & 1);
  }
  if (format < 0) fail("has no fmt chunk");
  if (!data) fail("has no data chunk");
  if (format != 1 && format != 3) fail("uses WAV format " + std::to_string(format) + " (supported: PCM and IEEE float)");
  if (channels < 1) fail("declares no channels");
  if (rate <= 0) fail("declares sample rate " + std::to_string(rate));
  const bool valid = format == 1 ? (bits == 8 || bits == 16 || bits == 24 || bits == 32) : (bits == 32 || bits == 64);
  if (!valid) fail("has " + std::to_string(bits) + "-bit " + (format == 1 ? "PCM" : "float") + " samples (unsupported)");

  const size_t bytes_per_sample = size_t(bits) / 8, frame = bytes_per_sample * size_t(channels);
  Audio audio;
  audio.sample_rate = rate;
  audio.samples.resize(data_size / frame);
  for (size_t i = 0; i < audio.samples.size(); ++i) {
    double sum = 0;
    for (size_t c = 0; c < size_t(channels); ++c) {
      const unsigned char* p = data + i * frame + c * bytes_per_sample;
      if (format == 3 && bits == 32) {
        float v;
        std::memcpy(&v, p, 4);
        sum += v;
      } else if (format == 3) {
        double v;
        std::memcpy(&v, p, 8);
        sum += v;
      } else if (bits == 8) {
        sum += (double(p[0]) - 128.0) / 128.0;
      } else if (bits == 16) {
        sum += double(int16_t(u16(p))) / 32768.0;
      } else if (bits == 24) {
        const int32_t v = int32_t(uint32_t(p[0]) << 8 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 24) >> 8;
        sum += double(v) / 8388608.0;
      } else {
        sum += double(int32_t(u32(p))) / 2147483648.0;
      }
    }
    audio.samples[i] = float(sum / channels);
  }
  return audio;
}

std::vector<float> resample(const std::vector<float>& samples, int from_rate, int to_rate) {
  if (from_rate == to_rate || samples.empty()) return samples;
  const double ratio = double(to_rate) / double(from_rate);
  const double cutoff = 0.95 * std::min(1.0, ratio);  // of the input's Nyquist frequency
  constexpr int kZeroCrossings = 16;
  const double half_width = kZeroCrossings / cutoff;  // input samples on each side
  const size_t n = size_t(std::ceil(double(samples.size()) * ratio));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const double center = double(i) / ratio;
    const long first = long(std::ceil(center - half_width)), last = long(std::floor(center + half_width));
    double acc = 0;
    for (long j = std::max(first, 0L); j <= std::min(last, long(samples.size()) - 1); ++j) {
      const double t = double(j) - center;
      const double x = std::numbers::pi * cutoff * t;
      const double sinc = x == 0 ? 1.0 : std::sin(x) / x;
      const double window = 0.5 + 0.5 * std::cos(std::numbers::pi * t / half_width);
      acc += samples[size_t(j)] * cutoff * sinc * window;
    }
    out[i] = float(acc);
  }
  return out;
}

}  // namespace vad
