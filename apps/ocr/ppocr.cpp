#include "ppocr.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace ppocr {

FloatImage to_bgr(const apps::Image& image) {
  FloatImage out{image.width, image.height, std::vector<float>(size_t(image.width) * size_t(image.height) * 3)};
  for (size_t i = 0; i < out.pixels.size(); i += 3) {
    out.pixels[i] = image.pixels[i + 2];
    out.pixels[i + 1] = image.pixels[i + 1];
    out.pixels[i + 2] = image.pixels[i];
  }
  return out;
}

namespace {

// Bilinear sample at pixel coordinates (x, y), clamped to the image (replicated border).
void sample(const FloatImage& image, float x, float y, float* out) {
  x = std::clamp(x, 0.0f, float(image.width - 1));
  y = std::clamp(y, 0.0f, float(image.height - 1));
  const int x0 = int(x), y0 = int(y);
  const int x1 = std::min(x0 + 1, image.width - 1), y1 = std::min(y0 + 1, image.height - 1);
  const float fx = x - float(x0), fy = y - float(y0);
  const float *a = image.at(x0, y0), *b = image.at(x1, y0), *c = image.at(x0, y1), *d = image.at(x1, y1);
  for (int k = 0; k < 3; ++k) {
    out[k] = (a[k] * (1 - fx) + b[k] * fx) * (1 - fy) + (c[k] * (1 - fx) + d[k] * fx) * fy;
  }
}

float distance(Point a, Point b) { return std::hypot(a.x - b.x, a.y - b.y); }

double cross(Point o, Point a, Point b) {
  return double(a.x - o.x) * double(b.y - o.y) - double(a.y - o.y) * double(b.x - o.x);
}

// Andrew's monotone chain; counter-clockwise, no repeated or collinear points.
std::vector<Point> convex_hull(std::vector<Point> pts) {
  std::sort(pts.begin(), pts.end(), [](Point a, Point b) { return a.x < b.x || (a.x == b.x && a.y < b.y); });
  pts.erase(std::unique(pts.begin(), pts.end(), [](Point a, Point b) { return a.x == b.x && a.y == b.y; }),
            pts.end());
  if (pts.size() <= 2) return pts;
  std::vector<Point> hull(2 * pts.size());
  size_t k = 0;
  for (size_t i = 0; i < pts.size(); ++i) {
    while (k >= 2 && cross(hull[k - 2], hull[k - 1], pts[i]) <= 0) --k;
    hull[k++] = pts[i];
  }
  for (size_t i = pts.size() - 1, lower = k + 1; i-- > 0;) {
    while (k >= lower && cross(hull[k - 2], hull[k - 1], pts[i]) <= 0) --k;
    hull[k++] = pts[i];
  }
  hull.resize(k - 1);
  return hull;
}

// Corners in PaddleOCR's get_mini_boxes order: the two leftmost (top one first), then the two
// rightmost (top one first) give top-left, bottom-left, top-right, bottom-right.
Quad order_corners(std::array<Point, 4> p) {
  std::stable_sort(p.begin(), p.end(), [](Point a, Point b) { return a.x < b.x; });
  const auto [tl, bl] = p[0].y <= p[1].y ? std::pair{p[0], p[1]} : std::pair{p[1], p[0]};
  const auto [tr, br] = p[2].y <= p[3].y ? std::pair{p[2], p[3]} : std::pair{p[3], p[2]};
  return {tl, tr, br, bl};
}

struct Rect {  // center, unit axis u (v is u turned 90 degrees), extents along u and v
  Point center;
  float ux = 1, uy = 0, width = 0, height = 0;
};

Rect min_rect(const std::vector<Point>& points) {
  const std::vector<Point> hull = convex_hull(points);
  Rect best;
  if (hull.empty()) return best;
  best.center = hull[0];
  double best_area = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < hull.size() && hull.size() > 1; ++i) {
    const Point a = hull[i], b = hull[(i + 1) % hull.size()];
    const double len = std::hypot(double(b.x - a.x), double(b.y - a.y));
    if (len == 0) continue;
    const double ux = (b.x - a.x) / len, uy = (b.y - a.y) / len;
    double u0 = 1e30, u1 = -1e30, v0 = 1e30, v1 = -1e30;
    for (const Point& p : hull) {
      const double u = p.x * ux + p.y * uy, v = -p.x * uy + p.y * ux;
      u0 = std::min(u0, u), u1 = std::max(u1, u), v0 = std::min(v0, v), v1 = std::max(v1, v);
    }
    const double area = (u1 - u0) * (v1 - v0);
    if (area < best_area) {
      best_area = area;
      const double cu = (u0 + u1) / 2, cv = (v0 + v1) / 2;
      best.center = {float(cu * ux - cv * uy), float(cu * uy + cv * ux)};
      best.ux = float(ux), best.uy = float(uy), best.width = float(u1 - u0), best.height = float(v1 - v0);
    }
  }
  return best;
}

Quad corners(const Rect& r) {
  std::array<Point, 4> p;
  const float su[4] = {-1, 1, 1, -1}, sv[4] = {-1, -1, 1, 1};
  for (int i = 0; i < 4; ++i) {
    const float u = su[i] * r.width / 2, v = sv[i] * r.height / 2;
    p[size_t(i)] = {r.center.x + u * r.ux - v * r.uy, r.center.y + u * r.uy + v * r.ux};
  }
  return order_corners(p);
}

}  // namespace

FloatImage resize(const FloatImage& image, int width, int height) {
  FloatImage out{width, height, std::vector<float>(size_t(width) * size_t(height) * 3)};
  const float sx = float(image.width) / float(width), sy = float(image.height) / float(height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      sample(image, (float(x) + 0.5f) * sx - 0.5f, (float(y) + 0.5f) * sy - 0.5f,
             out.pixels.data() + (size_t(y) * size_t(width) + size_t(x)) * 3);
    }
  }
  return out;
}

FloatImage rotate_180(const FloatImage& image) {
  FloatImage out{image.width, image.height, std::vector<float>(image.pixels.size())};
  const size_t n = size_t(image.width) * size_t(image.height);
  for (size_t i = 0; i < n; ++i) std::copy_n(image.pixels.data() + i * 3, 3, out.pixels.data() + (n - 1 - i) * 3);
  return out;
}

DetInput det_input(const FloatImage& image, int limit_side) {
  const float ratio = std::min(1.0f, float(limit_side) / float(std::max(image.width, image.height)));
  auto round32 = [](float v) { return std::max(32, int(std::lround(v / 32)) * 32); };
  DetInput in;
  in.width = round32(float(image.width) * ratio);
  in.height = round32(float(image.height) * ratio);
  in.scale_x = float(image.width) / float(in.width);
  in.scale_y = float(image.height) / float(in.height);
  const FloatImage resized = resize(image, in.width, in.height);
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stddev[3] = {0.229f, 0.224f, 0.225f};
  const size_t plane = size_t(in.width) * size_t(in.height);
  in.nchw.resize(plane * 3);
  for (size_t i = 0; i < plane; ++i) {
    for (size_t c = 0; c < 3; ++c) {
      in.nchw[c * plane + i] = (resized.pixels[i * 3 + c] / 255.0f - mean[c]) / stddev[c];
    }
  }
  return in;
}

Quad min_area_rect(const std::vector<Point>& points) { return corners(min_rect(points)); }

std::vector<Quad> db_boxes(const float* prob, int width, int height, const DetInput& input, int image_width,
                           int image_height, const DbParams& params) {
  // 8-connected regions by flood fill; per region its pixel count, probability sum, and each row's
  // leftmost and rightmost pixel (enough for the convex hull).
  std::vector<int> label(size_t(width) * size_t(height), 0);
  std::vector<int> stack;
  std::vector<Quad> boxes;
  int regions = 0;
  for (int start = 0; start < width * height; ++start) {
    if (label[size_t(start)] != 0 || !(prob[start] > params.threshold)) continue;
    if (++regions > params.max_candidates) break;
    double sum = 0;
    std::vector<std::pair<int, int>> row_extent(size_t(height), {width, -1});
    stack.assign(1, start);
    label[size_t(start)] = regions;
    size_t count = 0;
    while (!stack.empty()) {
      const int i = stack.back();
      stack.pop_back();
      const int x = i % width, y = i / width;
      ++count;
      sum += prob[i];
      auto& extent = row_extent[size_t(y)];
      extent.first = std::min(extent.first, x);
      extent.second = std::max(extent.second, x);
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
          const int nx = x + dx, ny = y + dy;
          if (nx < 0 || ny < 0 || nx >= width || ny >= height) continue;
          const int j = ny * width + nx;
          if (label[size_t(j)] == 0 && prob[j] > params.threshold) {
            label[size_t(j)] = regions;
            stack.push_back(j);
          }
        }
      }
    }
    if (sum / double(count) < params.box_threshold) continue;
    std::vector<Point> points;
    for (int y = 0; y < height; ++y) {
      const auto [x0, x1] = row_extent[size_t(y)];
      if (x1 < 0) continue;
      points.push_back({float(x0), float(y)});
      if (x1 != x0) points.push_back({float(x1), float(y)});
    }
    Rect rect = min_rect(points);
    if (std::min(rect.width, rect.height) < params.min_size) continue;
    const float grow = rect.width * rect.height * params.unclip_ratio / (2 * (rect.width + rect.height));
    rect.width += 2 * grow;
    rect.height += 2 * grow;
    if (std::min(rect.width, rect.height) < params.min_size + 2) continue;
    Quad box = corners(rect);
    for (Point& p : box) {
      p.x = std::clamp(std::round(p.x * input.scale_x), 0.0f, float(image_width));
      p.y = std::clamp(std::round(p.y * input.scale_y), 0.0f, float(image_height));
    }
    boxes.push_back(box);
  }
  sort_reading_order(boxes);
  return boxes;
}

void sort_reading_order(std::vector<Quad>& boxes) {
  std::stable_sort(boxes.begin(), boxes.end(), [](const Quad& a, const Quad& b) {
    return a[0].y < b[0].y || (a[0].y == b[0].y && a[0].x < b[0].x);
  });
  for (size_t i = 0; i + 1 < boxes.size(); ++i) {
    for (size_t j = i + 1; j-- > 0;) {
      if (std::abs(boxes[j + 1][0].y - boxes[j][0].y) < 10 && boxes[j + 1][0].x < boxes[j][0].x) {
        std::swap(boxes[j], boxes[j + 1]);
      } else {
        break;
      }
    }
  }
}

FloatImage crop(const FloatImage& image, const Quad& box) {
  const int w = std::max(1, int(std::max(distance(box[0], box[1]), distance(box[3], box[2]))));
  const int h = std::max(1, int(std::max(distance(box[0], box[3]), distance(box[1], box[2]))));
  FloatImage out{w, h, std::vector<float>(size_t(w) * size_t(h) * 3)};
  for (int y = 0; y < h; ++y) {
    const float v = (float(y) + 0.5f) / float(h);
    for (int x = 0; x < w; ++x) {
      const float u = (float(x) + 0.5f) / float(w);
      const Point top{box[0].x + u * (box[1].x - box[0].x), box[0].y + u * (box[1].y - box[0].y)};
      const Point bottom{box[3].x + u * (box[2].x - box[3].x), box[3].y + u * (box[2].y - box[3].y)};
      sample(image, top.x + v * (bottom.x - top.x) - 0.5f, top.y + v * (bottom.y - top.y) - 0.5f,
             out.pixels.data() + (size_t(y) * size_t(w) + size_t(x)) * 3);
    }
  }
  if (float(h) < 1.5f * float(w)) return out;
  FloatImage turned{h, w, std::vector<float>(out.pixels.size())};  // 90 degrees counter-clockwise
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      std::copy_n(out.at(x, y), 3, turned.pixels.data() + (size_t(w - 1 - x) * size_t(h) + size_t(y)) * 3);
    }
  }
  return turned;
}

std::vector<float> line_batch(const std::vector<const FloatImage*>& crops, int height, int width, size_t batch_size) {
  const size_t plane = size_t(height) * size_t(width);
  std::vector<float> batch(std::max(batch_size, crops.size()) * 3 * plane, 0.0f);
  for (size_t n = 0; n < crops.size(); ++n) {
    const FloatImage& c = *crops[n];
    const int w = std::clamp(int(std::ceil(float(height) * float(c.width) / float(c.height))), 1, width);
    const FloatImage resized = resize(c, w, height);
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < w; ++x) {
        const float* p = resized.at(x, y);
        for (size_t k = 0; k < 3; ++k) {
          batch[(n * 3 + k) * plane + size_t(y) * size_t(width) + size_t(x)] = p[k] / 127.5f - 1.0f;
        }
      }
    }
  }
  return batch;
}

std::vector<std::string> load_charset(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the character dictionary '" + path + "'");
  std::vector<std::string> charset{""};  // CTC blank
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    charset.push_back(line);
  }
  charset.push_back(" ");
  return charset;
}

std::pair<std::string, float> ctc_decode(const float* probs, int steps, int classes,
                                         const std::vector<std::string>& charset) {
  std::string text;
  double confidence = 0;
  int kept = 0, previous = -1;
  for (int t = 0; t < steps; ++t) {
    const float* row = probs + size_t(t) * size_t(classes);
    const int best = int(std::max_element(row, row + classes) - row);
    if (best != 0 && best != previous) {
      if (size_t(best) >= charset.size()) {
        throw std::runtime_error("recognizer class " + std::to_string(best) + " is outside the dictionary (" +
                                 std::to_string(charset.size()) + " characters)");
      }
      text += charset[size_t(best)];
      confidence += row[best];
      ++kept;
    }
    previous = best;
  }
  return {text, kept ? float(confidence / kept) : 0.0f};
}

}  // namespace ppocr
