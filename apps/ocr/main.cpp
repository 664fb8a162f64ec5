// ingot-ocr: reads the text in a photo with PP-OCRv4 (detection, orientation, recognition), using
// only Ingot's public API. The models come from scripts/fetch-models.sh; each is converted into a
// package on first use and loaded from it afterwards (apps/common/package_cache.h).
//
//   ingot-ocr IMAGE [--device cpu|cuda] [--package-dir DIR] [--model-dir DIR] [--output annotated.png]
//             [--json FILE] [--threads N]
#include <ingot/error.h>
#include <ingot/session.h>
#include <ingot/tensor.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/image.h"
#include "../common/package_cache.h"
#include "ppocr.h"

namespace {

constexpr const char* kDetModel = "ch_PP-OCRv4_det_infer.onnx";
constexpr const char* kClsModel = "ch_ppocr_mobile_v2.0_cls_infer.onnx";
constexpr const char* kRecModel = "ch_PP-OCRv4_rec_infer.onnx";
constexpr const char* kKeys = "ppocr_keys_v1.txt";
constexpr int kClsHeight = 48, kClsWidth = 192;    // PaddleOCR's cls_image_shape
constexpr float kClsThreshold = 0.9f;              // cls_thresh
constexpr int kRecHeight = 48, kRecMinWidth = 320;  // rec_image_shape
constexpr size_t kRecBatch = 6;                     // rec_batch_num
// On a GPU every run has one of a few shapes, measured when the packages are converted (tuning
// shapes), so that no launch searches cuDNN's algorithms: the detector sees a 960x960 canvas (the
// resized image top-left, zeros around), the classifier and recognizer batches of 6 (padded with
// empty lines), the recognizer widths in steps of 320 (up to 2560 measured; wider lines still run).
constexpr int kGpuDetSide = 960, kGpuRecStep = 320, kGpuRecSteps = 8;

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Line {
  ppocr::Quad box;
  std::string text;
  float confidence = 0;
  bool rotated = false;  // read upside down
};

struct StageTimes {
  double det = 0, cls = 0, rec = 0, post = 0;
};

// The first output of a one-output model as a host float tensor.
ingot::Tensor run_one(ingot::Session& session, std::vector<float>& data, ingot::Shape shape) {
  std::vector<ingot::Tensor> outputs =
      session.run(std::vector<ingot::Tensor>{ingot::Tensor::wrap(ingot::DType::Float32, std::move(shape), data.data())});
  if (outputs.empty() || outputs[0].dtype() != ingot::DType::Float32) {
    throw std::runtime_error("model '" + session.model_name() + "' did not return a float32 output");
  }
  return outputs[0];
}

class Ocr {
 public:
  Ocr(const std::string& model_dir, const std::string& package_dir, const ingot::SessionOptions& options)
      : gpu_(options.device.type != ingot::DeviceType::CPU),
        det_(load(model_dir + "/" + kDetModel, package_dir, options, {{{"x", {1, 3, kGpuDetSide, kGpuDetSide}}}})),
        cls_(load(model_dir + "/" + kClsModel, package_dir, options,
                  {{{"x", {int64_t(kRecBatch), 3, kClsHeight, kClsWidth}}}})),
        rec_(load(model_dir + "/" + kRecModel, package_dir, options, rec_tuning_shapes())),
        charset_(ppocr::load_charset(model_dir + "/" + kKeys)) {}

  double load_ms() const { return load_ms_; }
  // The stages of the last read().
  const StageTimes& times() const { return times_; }

  std::vector<Line> read(const apps::Image& image) {
    times_ = {};
    auto t = Clock::now();
    const ppocr::FloatImage bgr = ppocr::to_bgr(image);
    ppocr::DetInput in = ppocr::det_input(bgr, kGpuDetSide);

    const int det_h = gpu_ ? kGpuDetSide : in.height, det_w = gpu_ ? kGpuDetSide : in.width;
    std::vector<float> det_x = gpu_ ? pad_image(in.nchw, in.height, in.width, det_h, det_w) : std::move(in.nchw);
    times_.post += ms_since(t);

    t = Clock::now();
    ingot::Tensor prob = run_one(det_, det_x, {1, 3, det_h, det_w});
    times_.det += ms_since(t);
    if (prob.rank() != 4 || prob.dim(2) != det_h || prob.dim(3) != det_w) {
      throw std::runtime_error("the detector returned " + ingot::shape_str(prob.shape()) + " for a " +
                               std::to_string(det_h) + "x" + std::to_string(det_w) + " input");
    }

    t = Clock::now();
    std::vector<float> map(size_t(in.height) * size_t(in.width));  // the image's part of the map
    for (int y = 0; y < in.height; ++y) {
      std::copy_n(prob.data<float>() + size_t(y) * size_t(det_w), size_t(in.width), map.data() + size_t(y) * size_t(in.width));
    }
    std::vector<ppocr::Quad> boxes = ppocr::db_boxes(map.data(), in.width, in.height, in, image.width, image.height);
    std::vector<ppocr::FloatImage> crops;
    for (const ppocr::Quad& box : boxes) crops.push_back(ppocr::crop(bgr, box));
    times_.post += ms_since(t);
    if (crops.empty()) return {};

    const std::vector<size_t> flagged = upside_down(crops);
    // The classifier sees a long line squeezed into 192 columns and now and then calls an upright
    // line upside down: a flagged line is read both ways and the more confident reading kept.
    std::vector<ppocr::FloatImage> turned;
    for (size_t i : flagged) turned.push_back(ppocr::rotate_180(crops[i]));
    std::vector<const ppocr::FloatImage*> candidates;
    for (const auto& c : crops) candidates.push_back(&c);
    for (const auto& c : turned) candidates.push_back(&c);
    const std::vector<std::pair<std::string, float>> readings = recognize(candidates);

    std::vector<Line> lines;
    for (size_t i = 0; i < boxes.size(); ++i) {
      Line line{boxes[i], readings[i].first, readings[i].second, false};
      const auto it = std::find(flagged.begin(), flagged.end(), i);
      if (it != flagged.end()) {
        const auto& other = readings[crops.size() + size_t(it - flagged.begin())];
        if (other.second > line.confidence) line = {boxes[i], other.first, other.second, true};
      }
      lines.push_back(line);
    }
    return lines;
  }

 private:
  static std::vector<ingot::InputShapes> rec_tuning_shapes() {
    std::vector<ingot::InputShapes> sets;
    for (int k = 1; k <= kGpuRecSteps; ++k) sets.push_back({{"x", {int64_t(kRecBatch), 3, kRecHeight, k * kGpuRecStep}}});
    return sets;
  }

  // The NCHW image (3 x h x w) top-left in a zero canvas of H x W.
  static std::vector<float> pad_image(const std::vector<float>& x, int h, int w, int H, int W) {
    std::vector<float> out(size_t(3) * size_t(H) * size_t(W), 0.0f);
    for (size_t c = 0; c < 3; ++c) {
      for (int y = 0; y < h; ++y) {
        std::copy_n(x.data() + (c * size_t(h) + size_t(y)) * size_t(w), size_t(w),
                    out.data() + (c * size_t(H) + size_t(y)) * size_t(W));
      }
    }
    return out;
  }

  ingot::Session load(const std::string& model, const std::string& package_dir, const ingot::SessionOptions& options,
                      const std::vector<ingot::InputShapes>& tuning_shapes) {
    apps::require_file(model, "run scripts/fetch-models.sh, or pass --model-dir");
    apps::CachedSession cached = apps::load_cached(
        model, package_dir, options, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); },
        tuning_shapes);
    load_ms_ += cached.load_ms;
    return std::move(cached.session);
  }

  // Indices of the crops the orientation classifier calls upside down (class "180" above 0.9).
  // (On a GPU in batches of 6, else all at once.)
  std::vector<size_t> upside_down(const std::vector<ppocr::FloatImage>& crops) {
    const size_t step = gpu_ ? kRecBatch : crops.size();
    std::vector<size_t> flagged;
    for (size_t begin = 0; begin < crops.size(); begin += step) {
      auto t = Clock::now();
      std::vector<const ppocr::FloatImage*> part;
      for (size_t i = begin; i < std::min(crops.size(), begin + step); ++i) part.push_back(&crops[i]);
      std::vector<float> batch = ppocr::line_batch(part, kClsHeight, kClsWidth, step);
      times_.post += ms_since(t);
      t = Clock::now();
      ingot::Tensor scores = run_one(cls_, batch, {int64_t(step), 3, kClsHeight, kClsWidth});
      times_.cls += ms_since(t);
      if (scores.rank() != 2 || scores.dim(0) != int64_t(step) || scores.dim(1) != 2) {
        throw std::runtime_error("the orientation classifier returned " + ingot::shape_str(scores.shape()) +
                                 ", expected [" + std::to_string(step) + ",2]");
      }
      const float* s = scores.data<float>();
      for (size_t i = 0; i < part.size(); ++i) {
        if (s[2 * i + 1] > s[2 * i] && s[2 * i + 1] > kClsThreshold) flagged.push_back(begin + i);
      }
    }
    return flagged;
  }

  // Recognizes the crops in batches of similar aspect ratio (PaddleOCR's order), each batch as wide
  // as its widest line (at least 320, rounded up to 32 columns, on a GPU to 320, to bound the number
  // of shapes).
  std::vector<std::pair<std::string, float>> recognize(const std::vector<const ppocr::FloatImage*>& crops) {
    auto ratio = [&](size_t i) { return float(crops[i]->width) / float(crops[i]->height); };
    std::vector<size_t> order(crops.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ratio(a) < ratio(b); });
    std::vector<std::pair<std::string, float>> out(crops.size());
    for (size_t begin = 0; begin < order.size(); begin += kRecBatch) {
      auto t = Clock::now();
      const size_t end = std::min(order.size(), begin + kRecBatch);
      std::vector<const ppocr::FloatImage*> batch_crops;
      float widest = float(kRecMinWidth) / float(kRecHeight);
      for (size_t k = begin; k < end; ++k) {
        batch_crops.push_back(crops[order[k]]);
        widest = std::max(widest, ratio(order[k]));
      }
      const int round = gpu_ ? kGpuRecStep : 32;
      const int width = (int(std::ceil(float(kRecHeight) * widest)) + round - 1) / round * round;
      const size_t rows = gpu_ ? kRecBatch : batch_crops.size();
      std::vector<float> batch = ppocr::line_batch(batch_crops, kRecHeight, width, rows);
      times_.post += ms_since(t);
      t = Clock::now();
      ingot::Tensor probs = run_one(rec_, batch, {int64_t(rows), 3, kRecHeight, width});
      times_.rec += ms_since(t);
      t = Clock::now();
      if (probs.rank() != 3 || probs.dim(0) != int64_t(rows)) {
        throw std::runtime_error("the recognizer returned " + ingot::shape_str(probs.shape()) + " for " +
                                 std::to_string(batch_crops.size()) + " lines");
      }
      const int steps = int(probs.dim(1)), classes = int(probs.dim(2));
      for (size_t k = begin; k < end; ++k) {
        out[order[k]] = ppocr::ctc_decode(probs.data<float>() + (k - begin) * size_t(steps) * size_t(classes), steps,
                                          classes, charset_);
      }
      times_.post += ms_since(t);
    }
    return out;
  }

  double load_ms_ = 0;
  bool gpu_;
  ingot::Session det_, cls_, rec_;
  std::vector<std::string> charset_;
  StageTimes times_;
};

// PaddleOCR's draw_ocr_box_txt layout: the photo with the boxes on the left, each line's text in its
// box on a white page of the same size on the right.
apps::Image annotate(const apps::Image& image, const std::vector<Line>& lines) {
  apps::Image out;
  out.width = image.width * 2;
  out.height = image.height;
  out.pixels.assign(size_t(out.width) * size_t(out.height) * 3, 255);
  for (int y = 0; y < image.height; ++y) std::copy_n(image.at(0, y), size_t(image.width) * 3, out.at(0, y));
  const apps::Rgb colors[] = {{214, 39, 40}, {31, 119, 180}, {44, 160, 44}, {148, 103, 189}, {255, 127, 14}};
  for (size_t i = 0; i < lines.size(); ++i) {
    const Line& line = lines[i];
    const apps::Rgb color = colors[i % 5];
    for (int page = 0; page < 2; ++page) {
      const float dx = float(page * image.width);
      for (size_t k = 0; k < 4; ++k) {
        const ppocr::Point a = line.box[k], b = line.box[(k + 1) % 4];
        apps::draw_line(out, a.x + dx, a.y, b.x + dx, b.y, color, 1);
      }
    }
    // The text at the largest scale that fits the box (at least 1), vertically centered.
    const float box_w = std::hypot(line.box[1].x - line.box[0].x, line.box[1].y - line.box[0].y);
    const float box_h = std::hypot(line.box[3].x - line.box[0].x, line.box[3].y - line.box[0].y);
    int scale = std::max(1, int(box_h * 0.7f / 7));
    while (scale > 1 && float(apps::text_width(line.text, scale)) > box_w) --scale;
    const int x = image.width + int(line.box[0].x) + 2, y = int(line.box[0].y + (box_h - 7.0f * float(scale)) / 2);
    apps::draw_text(out, x, y, line.text, {0, 0, 0}, scale);
  }
  return out;
}

nlohmann::json to_json(const std::string& image_path, const std::vector<Line>& lines) {
  nlohmann::json out{{"image", image_path}, {"lines", nlohmann::json::array()}};
  for (const Line& line : lines) {
    nlohmann::json box = nlohmann::json::array();
    for (const ppocr::Point& p : line.box) box.push_back({p.x, p.y});
    out["lines"].push_back({{"text", line.text}, {"confidence", line.confidence}, {"box", box}, {"rotated", line.rotated}});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Reads the text in a photo with PP-OCRv4 (detection, orientation, recognition) on Ingot"};
  std::string image_path, device = "cpu", package_dir = apps::package_cache_dir(),
                          model_dir = apps::model_cache_dir() + "/ocr-models/assets", output, json_path;
  int threads = 0, repeat = 1;
  app.add_option("image", image_path, "PNG or JPEG photo")->required();
  app.add_option("--device", device, "cpu or cuda[:N]");
  app.add_option("--package-dir", package_dir, "Where converted packages are cached")->capture_default_str();
  app.add_option("--model-dir", model_dir, "PP-OCR's ONNX models and ppocr_keys_v1.txt (scripts/fetch-models.sh)")
      ->capture_default_str();
  app.add_option("--output,-o", output, "Write the photo with the boxes beside the text read (PNG)");
  app.add_option("--json", json_path, "Write the lines (text, confidence, box) as JSON");
  app.add_option("--threads", threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  app.add_option("--repeat", repeat, "Read the image this many times and also report the later runs' median time")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  try {
    const auto start = Clock::now();
    apps::Image image = apps::load_image(image_path);
    ingot::SessionOptions options;
    options.device = ingot::Device::parse(device);
    options.threads = threads;
    Ocr ocr(model_dir, package_dir, options);
    const double load_ms = ms_since(start);
    const auto t = Clock::now();
    const std::vector<Line> lines = ocr.read(image);
    const double read_ms = ms_since(t);
    const StageTimes first = ocr.times();
    std::vector<StageTimes> later;  // --repeat: the same image again, as a long-running process would
    for (int i = 1; i < repeat; ++i) {
      ocr.read(image);
      later.push_back(ocr.times());
    }

    for (size_t i = 0; i < lines.size(); ++i) {
      const Line& l = lines[i];
      std::printf("line %zu: %.3f [%.0f,%.0f %.0f,%.0f %.0f,%.0f %.0f,%.0f]%s %s\n", i, l.confidence, l.box[0].x,
                  l.box[0].y, l.box[1].x, l.box[1].y, l.box[2].x, l.box[2].y, l.box[3].x, l.box[3].y,
                  l.rotated ? " (upside down)" : "", l.text.c_str());
    }
    std::printf("time: load %.1f ms (image and 3 packages), det %.1f ms, cls %.1f ms, rec %.1f ms (%zu lines), "
                "pre/post-processing %.1f ms, total %.1f ms\n",
                load_ms, first.det, first.cls, first.rec, lines.size(), first.post, load_ms + read_ms);
    if (!later.empty()) {
      auto median = [&](double StageTimes::*stage) {
        std::vector<double> v;
        for (const StageTimes& s : later) v.push_back(s.*stage);
        std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
        return v[v.size() / 2];
      };
      const double det = median(&StageTimes::det), cls = median(&StageTimes::cls), rec = median(&StageTimes::rec),
                   post = median(&StageTimes::post);
      std::printf("time of later runs (median of %zu): det %.1f ms, cls %.1f ms, rec %.1f ms, pre/post-processing "
                  "%.1f ms, %.1f ms per image\n",
                  later.size(), det, cls, rec, post, det + cls + rec + post);
    }
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << to_json(image_path, lines).dump(1) << "\n";
      if (!out) throw std::runtime_error("cannot write '" + json_path + "'");
    }
    if (!output.empty()) {
      apps::save_png(annotate(image, lines), output);
      std::printf("wrote %s\n", output.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
