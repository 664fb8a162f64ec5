#include "plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "image.h"

namespace apps::plot {
namespace {

void text(Image& img, int x, int y, const std::string& s, Rgb c, int scale = 2) { draw_text(img, x, y, s, c, scale); }
int text_width(const std::string& s, int scale = 2) { return apps::text_width(s, scale); }
void dot(Image& img, int x, int y, Rgb c) { put_pixel(img, x, y, c); }

void line(Image& img, double x0, double y0, double x1, double y1, Rgb c, int thickness) {
  draw_line(img, float(x0), float(y0), float(x1), float(y1), c, thickness);
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, std::abs(v) >= 100 || v == 0 ? "%.0f" : std::abs(v) >= 1 ? "%.3g" : "%.4f", v);
  return buf;
}

}  // namespace

void save_epochs_png(const std::string& path, const std::string& title, const std::vector<Series>& series) {
  const int width = 800, panel = 300, top = 40, left = 90, right = 30;
  Image img;
  img.width = width;
  img.height = top + panel * int(series.size()) + 10;
  img.pixels.assign(size_t(img.width) * size_t(img.height) * 3, 255);
  const Rgb black{0, 0, 0}, grey{200, 200, 200}, colors[] = {{31, 119, 180}, {214, 39, 40}, {44, 160, 44}, {148, 103, 189}};
  text(img, (width - text_width(title)) / 2, 12, title, black);
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    const int y0 = top + int(k) * panel + 30, y1 = top + int(k + 1) * panel - 40, x0 = left, x1 = width - right;
    if (s.values.empty()) continue;
    double lo = *std::min_element(s.values.begin(), s.values.end()), hi = *std::max_element(s.values.begin(), s.values.end());
    if (hi - lo < 1e-12) {
      lo -= 0.5 * std::max(std::abs(lo), 1e-3);
      hi += 0.5 * std::max(std::abs(hi), 1e-3);
    }
    const double pad = (hi - lo) * 0.08;
    lo -= pad;
    hi += pad;
    const size_t n = s.values.size();
    auto px = [&](size_t i) { return n == 1 ? (x0 + x1) / 2.0 : x0 + double(x1 - x0) * double(i) / double(n - 1); };
    auto py = [&](double v) { return y1 - double(y1 - y0) * (v - lo) / (hi - lo); };
    for (int t = 0; t <= 4; ++t) {  // grid and y labels
      const double v = lo + (hi - lo) * t / 4;
      line(img, x0, py(v), x1, py(v), grey, 1);
      const std::string label = number(v);
      text(img, x0 - 8 - text_width(label), int(py(v)) - 7, label, black);
    }
    line(img, x0, y0, x0, y1, black, 1);
    line(img, x0, y1, x1, y1, black, 1);
    const size_t every = std::max<size_t>(1, n / 10);
    for (size_t i = 0; i < n; i += every) {  // x labels: epochs from 1
      const std::string label = std::to_string(i + 1);
      text(img, int(px(i)) - text_width(label) / 2, y1 + 8, label, black);
    }
    const Rgb c = colors[k % 4];
    for (size_t i = 0; i + 1 < n; ++i) line(img, px(i), py(s.values[i]), px(i + 1), py(s.values[i + 1]), c, 3);
    for (size_t i = 0; i < n; ++i) {
      for (int dy = -3; dy <= 3; ++dy)
        for (int dx = -3; dx <= 3; ++dx)
          if (dx * dx + dy * dy <= 9) dot(img, int(px(i)) + dx, int(py(s.values[i])) + dy, c);
    }
    const std::string name = s.name + " (last " + number(s.values.back()) + ")";
    text(img, x0 + 10, y0 - 22, name, c);
    text(img, x1 - text_width("epoch"), y1 + 24, "epoch", black);
  }
  save_png(img, path);
}

void save_timeline_png(const std::string& path, const std::string& title, double seconds_per_value,
                       const std::vector<double>& values, const std::vector<Interval>& shaded, double threshold) {
  const int width = 1200, height = 360, top = 44, left = 70, right = 30, bottom = 50;
  Image img;
  img.width = width;
  img.height = height;
  img.pixels.assign(size_t(width) * size_t(height) * 3, 255);
  const Rgb black{0, 0, 0}, grey{200, 200, 200}, blue{31, 119, 180}, red{214, 39, 40}, shade{44, 160, 44};
  text(img, (width - text_width(title)) / 2, 12, title, black);
  const int x0 = left, x1 = width - right, y0 = top, y1 = height - bottom;
  const double duration = std::max(seconds_per_value * double(values.size()), 1e-3);
  auto px = [&](double seconds) { return x0 + double(x1 - x0) * seconds / duration; };
  auto py = [&](double v) { return y1 - double(y1 - y0) * std::clamp(v, 0.0, 1.0); };
  for (const Interval& s : shaded) {
    fill_rect(img, int(std::lround(px(s.start))), y0, int(std::lround(px(s.end))) + 1, y1, shade, 0.25f);
  }
  for (int t = 0; t <= 4; ++t) {
    const double v = t / 4.0;
    line(img, x0, py(v), x1, py(v), grey, 1);
    char label_text[16];
    std::snprintf(label_text, sizeof label_text, "%g", v);
    const std::string label = label_text;
    text(img, x0 - 8 - text_width(label), int(py(v)) - 7, label, black);
  }
  if (threshold > 0) line(img, x0, py(threshold), x1, py(threshold), red, 1);
  line(img, x0, y0, x0, y1, black, 1);
  line(img, x0, y1, x1, y1, black, 1);
  // x labels every 1, 2, 5, 10, ... seconds, at most ~12 of them
  double step = 1;
  for (double s : {1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0}) {
    step = s;
    if (duration / s <= 12) break;
  }
  for (double s = 0; s <= duration + 1e-9; s += step) {
    const std::string label = number(s);
    line(img, px(s), y1, px(s), y1 + 5, black, 1);
    text(img, int(px(s)) - text_width(label) / 2, y1 + 9, label, black);
  }
  text(img, x1 - text_width("seconds"), y1 + 28, "seconds", black);
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    line(img, px((double(i) + 0.5) * seconds_per_value), py(values[i]), px((double(i) + 1.5) * seconds_per_value),
         py(values[i + 1]), blue, 2);
  }
  save_png(img, path);
}

}  // namespace apps::plot
