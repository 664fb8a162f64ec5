// BlazeFace post-processing: SSD anchors, decoding of the regressions, and MediaPipe's weighted
// non-max suppression ("blending"). Plain C++ with no Ingot types, header-only so the unit test can
// include it without linking the app.
//
// The scheme follows MediaPipe's face_detection_short_range (front, 128x128) and full-range-back
// (256x256) graphs: SsdAnchorsCalculator with fixed_anchor_size, TensorsToDetectionsCalculator with
// x/y/w/h scales equal to the input size, and NonMaxSuppressionCalculator in WEIGHTED mode.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace blazeface {

// Values per anchor in the regression output: box (dx, dy, w, h) then 6 keypoints (x, y).
inline constexpr int kRegressionSize = 16;
inline constexpr int kNumKeypoints = 6;
inline constexpr const char* kKeypointNames[kNumKeypoints] = {"right_eye", "left_eye",          "nose",
                                                              "mouth",     "right_ear_tragion", "left_ear_tragion"};

struct Point {
  float x = 0, y = 0;
};

// Anchor centers in normalized [0,1] input coordinates. Anchor width/height are 1 (fixed size),
// so the regressions only need dividing by the input size.
struct Anchor {
  float cx = 0, cy = 0;
};

// A face in normalized coordinates of whatever frame it was decoded in (model input, or image
// pixels after map_to_image).
struct Detection {
  float score = 0;
  float xmin = 0, ymin = 0, xmax = 0, ymax = 0;
  std::array<Point, kNumKeypoints> keypoints{};
};

// MediaPipe's SSD anchor generation for BlazeFace: consecutive layers with the same stride share one
// feature map, each layer adding 2 anchors per cell (aspect ratio 1 plus the interpolated scale).
// The order (row, column, anchor) matches the order of the model's outputs.
inline std::vector<Anchor> make_anchors(int input_size, const std::vector<int>& strides) {
  std::vector<Anchor> anchors;
  size_t layer = 0;
  while (layer < strides.size()) {
    int per_cell = 0;
    size_t last = layer;
    while (last < strides.size() && strides[last] == strides[layer]) {
      per_cell += 2;
      ++last;
    }
    const int grid = (input_size + strides[layer] - 1) / strides[layer];
    for (int y = 0; y < grid; ++y) {
      for (int x = 0; x < grid; ++x) {
        for (int a = 0; a < per_cell; ++a)
          anchors.push_back({(float(x) + 0.5f) / float(grid), (float(y) + 0.5f) / float(grid)});
      }
    }
    layer = last;
  }
  return anchors;
}

// The two published BlazeFace variants: front camera (128x128, strides 8,16,16,16) and back camera
// (256x256, strides 16,32,32,32). Both give 16x16x2 + 8x8x6 = 896 anchors.
inline std::vector<Anchor> anchors_for_input(int input_size) {
  if (input_size == 128) return make_anchors(128, {8, 16, 16, 16});
  if (input_size == 256) return make_anchors(256, {16, 32, 32, 32});
  throw std::invalid_argument("BlazeFace: unsupported input size " + std::to_string(input_size) +
                              " (expected 128 or 256)");
}

inline float sigmoid(float logit) {
  // MediaPipe clips logits to +-100 before the sigmoid (score_clipping_thresh).
  logit = std::clamp(logit, -100.0f, 100.0f);
  return 1.0f / (1.0f + std::exp(-logit));
}

// Decodes raw outputs: `logits` holds one score logit per anchor, `regressions` kRegressionSize
// values per anchor, both in anchor order. Keeps detections whose sigmoid score is >= threshold.
// Coordinates are normalized to the model input ([0,1] across the letterboxed square).
inline std::vector<Detection> decode(const std::vector<Anchor>& anchors, const float* logits, const float* regressions,
                                     int input_size, float score_threshold) {
  std::vector<Detection> out;
  const float scale = 1.0f / float(input_size);
  for (size_t i = 0; i < anchors.size(); ++i) {
    const float score = sigmoid(logits[i]);
    if (score < score_threshold) continue;
    const float* r = regressions + i * kRegressionSize;
    const Anchor& a = anchors[i];
    const float cx = a.cx + r[0] * scale, cy = a.cy + r[1] * scale;
    const float w = r[2] * scale, h = r[3] * scale;
    Detection d;
    d.score = score;
    d.xmin = cx - w / 2;
    d.ymin = cy - h / 2;
    d.xmax = cx + w / 2;
    d.ymax = cy + h / 2;
    for (int k = 0; k < kNumKeypoints; ++k) {
      d.keypoints[k] = {a.cx + r[4 + 2 * k] * scale, a.cy + r[5 + 2 * k] * scale};
    }
    out.push_back(d);
  }
  return out;
}

inline float iou(const Detection& a, const Detection& b) {
  const float ix = std::max(0.0f, std::min(a.xmax, b.xmax) - std::max(a.xmin, b.xmin));
  const float iy = std::max(0.0f, std::min(a.ymax, b.ymax) - std::max(a.ymin, b.ymin));
  const float inter = ix * iy;
  const float uni = (a.xmax - a.xmin) * (a.ymax - a.ymin) + (b.xmax - b.xmin) * (b.ymax - b.ymin) - inter;
  return uni > 0 ? inter / uni : 0.0f;
}

// MediaPipe's weighted NMS: take the best remaining detection, gather every remaining detection
// overlapping it by more than `iou_threshold` (itself included), and replace the group by the
// score-weighted mean of their boxes and keypoints, keeping the best score. Neighbouring anchors
// all fire on one face; blending them gives steadier boxes than dropping all but one.
inline std::vector<Detection> weighted_nms(std::vector<Detection> detections, float iou_threshold = 0.3f) {
  std::stable_sort(detections.begin(), detections.end(),
                   [](const Detection& a, const Detection& b) { return a.score > b.score; });
  std::vector<Detection> result;
  std::vector<Detection> remaining = std::move(detections);
  while (!remaining.empty()) {
    const Detection best = remaining.front();
    std::vector<Detection> rest;
    Detection sum;  // score-weighted sums
    float total = 0;
    for (const Detection& d : remaining) {
      if (iou(best, d) > iou_threshold || &d == &remaining.front()) {
        sum.xmin += d.score * d.xmin;
        sum.ymin += d.score * d.ymin;
        sum.xmax += d.score * d.xmax;
        sum.ymax += d.score * d.ymax;
        for (int k = 0; k < kNumKeypoints; ++k) {
          sum.keypoints[k].x += d.score * d.keypoints[k].x;
          sum.keypoints[k].y += d.score * d.keypoints[k].y;
        }
        total += d.score;
      } else {
        rest.push_back(d);
      }
    }
    Detection blended = best;
    if (total > 0) {
      blended.xmin = sum.xmin / total;
      blended.ymin = sum.ymin / total;
      blended.xmax = sum.xmax / total;
      blended.ymax = sum.ymax / total;
      for (int k = 0; k < kNumKeypoints; ++k) {
        blended.keypoints[k] = {sum.keypoints[k].x / total, sum.keypoints[k].y / total};
      }
    }
    result.push_back(blended);
    remaining = std::move(rest);
  }
  return result;
}

// How an image was fitted into the square model input: scaled by `scale` (same on both axes, so
// faces keep their shape) and placed at (pad_x, pad_y) in input pixels; the rest is padding.
struct Letterbox {
  int input_size = 0;
  float scale = 1;
  float pad_x = 0, pad_y = 0;
};

inline Letterbox make_letterbox(int image_width, int image_height, int input_size) {
  if (image_width <= 0 || image_height <= 0) throw std::invalid_argument("BlazeFace: empty image");
  Letterbox lb;
  lb.input_size = input_size;
  lb.scale = float(input_size) / float(std::max(image_width, image_height));
  lb.pad_x = (float(input_size) - float(image_width) * lb.scale) / 2;
  lb.pad_y = (float(input_size) - float(image_height) * lb.scale) / 2;
  return lb;
}

// Maps a detection from normalized model-input coordinates to image pixels.
inline Detection map_to_image(const Detection& d, const Letterbox& lb) {
  auto map_x = [&](float x) { return (x * float(lb.input_size) - lb.pad_x) / lb.scale; };
  auto map_y = [&](float y) { return (y * float(lb.input_size) - lb.pad_y) / lb.scale; };
  Detection m = d;
  m.xmin = map_x(d.xmin);
  m.xmax = map_x(d.xmax);
  m.ymin = map_y(d.ymin);
  m.ymax = map_y(d.ymax);
  for (int k = 0; k < kNumKeypoints; ++k) m.keypoints[k] = {map_x(d.keypoints[k].x), map_y(d.keypoints[k].y)};
  return m;
}

}  // namespace blazeface
