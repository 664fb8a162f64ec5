// ingot-facedetect: finds faces in a photo with MediaPipe's BlazeFace model, using only Ingot's
// public API. See docs/MODELS.md for fetching the model.
//
//   ingot-facedetect MODEL.onnx IMAGE.(png|jpg) [--output annotated.png] [--threads N]
//                    [--score-threshold 0.75] [--iou-threshold 0.3]
#include <ingot/session.h>
#include <ingot/tensor.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "blazeface.h"
#include "../common/image.h"

namespace {

constexpr const char* kUsage =
    "usage: ingot-facedetect MODEL.onnx IMAGE.(png|jpg) [--output annotated.png] [--threads N]\n"
    "                        [--score-threshold 0.75] [--iou-threshold 0.3]\n"
    "  MODEL: BlazeFace face_detection_front_128x128 or face_detection_back_256x256 (scripts/fetch-models.sh)\n";

struct Options {
  std::string model;
  std::string image;
  std::string output;
  int threads = 0;
  float score_threshold = 0.75f;
  float iou_threshold = 0.3f;
};

float parse_float(const std::string& flag, const std::string& text) {
  size_t used = 0;
  float value = 0;
  try {
    value = std::stof(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size()) throw std::invalid_argument(flag + ": expected a number, got '" + text + "'");
  return value;
}

int parse_int(const std::string& flag, const std::string& text) {
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size()) throw std::invalid_argument(flag + ": expected an integer, got '" + text + "'");
  return value;
}

Options parse_args(int argc, char** argv) {
  Options options;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + ": missing value");
      return argv[++i];
    };
    if (arg == "--output" || arg == "-o") {
      options.output = value();
    } else if (arg == "--threads") {
      options.threads = parse_int(arg, value());
      if (options.threads < 0) throw std::invalid_argument("--threads: expected 0 (all cores) or more");
    } else if (arg == "--score-threshold") {
      options.score_threshold = parse_float(arg, value());
      if (!(options.score_threshold >= 0 && options.score_threshold <= 1)) {
        throw std::invalid_argument("--score-threshold: expected a value in [0, 1]");
      }
    } else if (arg == "--iou-threshold") {
      options.iou_threshold = parse_float(arg, value());
      if (!(options.iou_threshold >= 0 && options.iou_threshold <= 1)) {
        throw std::invalid_argument("--iou-threshold: expected a value in [0, 1]");
      }
    } else if (arg.starts_with("-") && arg.size() > 1) {
      throw std::invalid_argument("unknown option " + arg);
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() != 2) throw std::invalid_argument("expected MODEL and IMAGE");
  options.model = positional[0];
  options.image = positional[1];
  return options;
}

// The model's square input side from its declared NHWC input shape [1, S, S, 3].
int input_size_of(const ingot::Session& session) {
  if (session.inputs().size() != 1) {
    throw std::runtime_error("expected a BlazeFace model with one input, got " +
                             std::to_string(session.inputs().size()));
  }
  const ingot::TensorInfo& input = session.inputs()[0];
  const auto& dims = input.dims;
  if (input.dtype != ingot::DType::Float32 || dims.size() != 4 || dims[3] != "3" || dims[1] != dims[2]) {
    throw std::runtime_error("expected a BlazeFace input float32[1,S,S,3], got " + input.str());
  }
  return std::stoi(dims[1]);
}

// BlazeFace has two score outputs [1,N,1] and two regression outputs [1,N,16], one pair per
// feature map; the anchors list the larger (finer) map first. Concatenates each kind in that order.
void gather_outputs(const std::vector<ingot::Tensor>& outputs, size_t num_anchors, std::vector<float>& logits,
                    std::vector<float>& regressions) {
  std::vector<const ingot::Tensor*> scores, boxes;
  for (const ingot::Tensor& t : outputs) {
    if (t.dtype() != ingot::DType::Float32 || t.rank() != 3) continue;
    if (t.dim(2) == 1) scores.push_back(&t);
    if (t.dim(2) == blazeface::kRegressionSize) boxes.push_back(&t);
  }
  auto by_anchor_count = [](const ingot::Tensor* a, const ingot::Tensor* b) { return a->dim(1) > b->dim(1); };
  std::stable_sort(scores.begin(), scores.end(), by_anchor_count);
  std::stable_sort(boxes.begin(), boxes.end(), by_anchor_count);
  logits.clear();
  regressions.clear();
  for (const ingot::Tensor* t : scores) {
    auto values = t->to_vector<float>();
    logits.insert(logits.end(), values.begin(), values.end());
  }
  for (const ingot::Tensor* t : boxes) {
    auto values = t->to_vector<float>();
    regressions.insert(regressions.end(), values.begin(), values.end());
  }
  if (logits.size() != num_anchors || regressions.size() != num_anchors * blazeface::kRegressionSize) {
    throw std::runtime_error("model outputs do not match the BlazeFace anchors: " + std::to_string(logits.size()) +
                             " scores and " + std::to_string(regressions.size() / blazeface::kRegressionSize) +
                             " boxes for " + std::to_string(num_anchors) + " anchors");
  }
}

void annotate(apps::Image& image, const std::vector<blazeface::Detection>& faces) {
  const int thickness = std::max(2, std::max(image.width, image.height) / 256);
  // One colour per keypoint, in kKeypointNames order.
  const apps::Rgb keypoint_colors[blazeface::kNumKeypoints] = {{255, 0, 0},   {0, 0, 255},   {255, 255, 0},
                                                                     {255, 0, 255}, {0, 255, 255}, {255, 128, 0}};
  for (const blazeface::Detection& face : faces) {
    apps::draw_rect(image, face.xmin, face.ymin, face.xmax, face.ymax, {0, 255, 0}, thickness);
    const float radius = std::max(2.0f, (face.xmax - face.xmin) / 25.0f);  // visible but not hiding small faces
    for (int k = 0; k < blazeface::kNumKeypoints; ++k) {
      apps::draw_disc(image, face.keypoints[k].x, face.keypoints[k].y, radius, keypoint_colors[k]);
    }
  }
}

int run(const Options& options) {
  apps::Image image = apps::load_image(options.image);

  ingot::SessionOptions session_options;
  session_options.threads = options.threads;
  ingot::Session session = ingot::Session::load(options.model, session_options);
  const int size = input_size_of(session);
  const std::vector<blazeface::Anchor> anchors = blazeface::anchors_for_input(size);

  const blazeface::Letterbox box = blazeface::make_letterbox(image.width, image.height, size);
  std::vector<float> pixels = apps::letterbox_to_float(image, size, box.scale, box.pad_x, box.pad_y);
  ingot::Tensor input = ingot::Tensor::wrap(ingot::DType::Float32, {1, size, size, 3}, pixels.data());

  const auto start = std::chrono::steady_clock::now();
  std::vector<ingot::Tensor> outputs = session.run(std::vector<ingot::Tensor>{input});
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  std::vector<float> logits, regressions;
  gather_outputs(outputs, anchors.size(), logits, regressions);
  std::vector<blazeface::Detection> faces = blazeface::weighted_nms(
      blazeface::decode(anchors, logits.data(), regressions.data(), size, options.score_threshold),
      options.iou_threshold);
  for (blazeface::Detection& face : faces) face = blazeface::map_to_image(face, box);

  std::printf("%s: %dx%d, model input %dx%d, inference %.1f ms, %zu face%s\n", options.image.c_str(), image.width,
              image.height, size, size, ms, faces.size(), faces.size() == 1 ? "" : "s");
  for (size_t i = 0; i < faces.size(); ++i) {
    const blazeface::Detection& f = faces[i];
    std::printf("face %zu: score %.3f box %.1f %.1f %.1f %.1f", i, f.score, f.xmin, f.ymin, f.xmax, f.ymax);
    for (int k = 0; k < blazeface::kNumKeypoints; ++k) {
      std::printf(" %s %.1f,%.1f", blazeface::kKeypointNames[k], f.keypoints[k].x, f.keypoints[k].y);
    }
    std::printf("\n");
  }
  if (!options.output.empty()) {
    annotate(image, faces);
    apps::save_png(image, options.output);
    std::printf("wrote %s\n", options.output.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  Options options;
  try {
    options = parse_args(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n%s", e.what(), kUsage);
    return 2;
  }
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
