// Converting a model into an .ingot package (what `ingot convert` does, as a library call): the
// load-time compile pipeline run once, the result saved, and on a GPU one run that measures the
// backends' algorithm choices and generates their kernels, stored in the package so its launch
// compiles and searches nothing. Extension ops the model uses travel inside the package.
// docs/PACKAGE_FORMAT.md.
#pragma once
#include <ingot/export.h>
#include <ingot/quantize.h>
#include <ingot/session.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

INGOT_API_BEGIN
namespace ingot {

// Shapes of some of a model's inputs: {{"x", {1, 3, 224, 224}}}.
using InputShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

struct ConvertSettings {
  Device device = Device::cpu();
  Precision precision = Precision::FP32;
  bool optimize = true;
  // Fixes symbolic dims of inputs. A GPU package stores algorithm choices for the fixed shapes, or
  // for the shape sets in `tuning_shapes`.
  InputShapes input_shapes;
  // GPU: shape sets the package's inputs will run at, while they keep their symbolic dims (like
  // TensorRT's optimization profiles): convert runs the model once per set and stores the algorithm
  // choices measured for each, so a launch that runs those shapes searches nothing. Inputs a set
  // does not name run at stand-in sizes (batch 1, other dims 64).
  std::vector<InputShapes> tuning_shapes;
  // Precision::INT8: calibration inputs and choices (quantize.input_shapes is `input_shapes`).
  QuantizeSettings quantize;
  // Each step as it starts (done false) and ends (done true, with a note): "import", "quantize"
  // (int8), "passes", "precision", "writing", "tuning".
  std::function<void(const std::string& step, bool done, const std::string& note)> progress;
};

struct ConvertResult {
  std::string path, device, arch, precision;
  int64_t bytes = 0;
  int algorithms = 0;   // measured algorithm choices stored (GPU)
  int device_code = 0;  // generated kernels stored (GPU)
  std::string tuning_note;            // why tuning stored less than it could, or ""
  std::vector<std::string> extensions;  // extension libraries embedded
  std::optional<QuantizeReport> quantization;  // int8: what was quantized, and the accuracy on the calibration set
};

// Converts the ONNX model at `model_path` into the package `package_path`. Throws ingot::Error
// naming the model, the input or the device at fault.
ConvertResult convert(const std::string& model_path, const std::string& package_path, const ConvertSettings& settings = {});

}  // namespace ingot
INGOT_API_END
