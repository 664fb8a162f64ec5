// PP-OCR's pre- and post-processing around the three models (detection, orientation, recognition),
// after PaddleOCR's tools/infer (predict_det / predict_cls / predict_rec, DBPostProcess,
// CTCLabelDecode). Pixels are BGR floats in [0, 255], as PaddleOCR's OpenCV images are.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "../common/image.h"

namespace ppocr {

struct Point {
  float x = 0, y = 0;
};
// Corners top-left, top-right, bottom-right, bottom-left.
using Quad = std::array<Point, 4>;

struct FloatImage {
  int width = 0, height = 0;
  std::vector<float> pixels;  // HWC, 3 channels, BGR
  const float* at(int x, int y) const { return pixels.data() + (size_t(y) * size_t(width) + size_t(x)) * 3; }
};

FloatImage to_bgr(const apps::Image& image);
// Bilinear with half-pixel centers (OpenCV's INTER_LINEAR).
FloatImage resize(const FloatImage& image, int width, int height);
FloatImage rotate_180(const FloatImage& image);

// Detection input: the image resized so that its longer side is at most `limit_side` and both
// sides are multiples of 32, ImageNet-normalized, NCHW. scale_x/y map model pixels to the image.
struct DetInput {
  std::vector<float> nchw;
  int width = 0, height = 0;
  float scale_x = 1, scale_y = 1;
};
DetInput det_input(const FloatImage& image, int limit_side = 960);

struct DbParams {
  float threshold = 0.3f;      // pixel is text
  float box_threshold = 0.6f;  // region's mean probability
  float unclip_ratio = 1.5f;   // each side grows by area * ratio / perimeter
  float min_size = 3;          // shorter side of a region's rectangle, model pixels
  int max_candidates = 1000;
};

// DB post-processing of the probability map (height x width): pixels above `threshold`, their
// 8-connected regions, each scored by its mean probability (PaddleOCR's "slow" score mode: the
// bounding rectangle's mean of "fast" mode drops slightly curved lines of a photographed page),
// its minimum-area rectangle unclipped and mapped to the image. Boxes in reading order.
std::vector<Quad> db_boxes(const float* prob, int width, int height, const DetInput& input, int image_width,
                           int image_height, const DbParams& params = {});

// The smallest rectangle around the points (convex hull, rotating calipers), corners in Quad order.
Quad min_area_rect(const std::vector<Point>& points);

// Top to bottom; boxes whose tops are within 10 pixels, left to right (PaddleOCR's sorted_boxes).
void sort_reading_order(std::vector<Quad>& boxes);

// The quadrilateral's content as an upright image (bilinear, replicated border); a crop at least
// 1.5 times taller than wide is turned 90 degrees counter-clockwise (PaddleOCR's get_rotate_crop_image).
FloatImage crop(const FloatImage& image, const Quad& box);

// A batch for the classifier or recognizer: each crop resized to `height` keeping its aspect ratio
// (at most `width` wide), mapped to [-1, 1], right-padded with zeros; NCHW. `batch` (at least the
// number of crops; 0: that number) pads the batch with all-zero lines.
std::vector<float> line_batch(const std::vector<const FloatImage*>& crops, int height, int width, size_t batch = 0);

// The recognizer's characters: index 0 is CTC's blank, then the dictionary's lines, then ' '.
std::vector<std::string> load_charset(const std::string& path);

// Greedy CTC decoding of one line's [steps x classes] probabilities: best class per step, repeats
// merged, blanks dropped; the confidence is the mean probability of the kept steps.
std::pair<std::string, float> ctc_decode(const float* probs, int steps, int classes,
                                         const std::vector<std::string>& charset);

}  // namespace ppocr
