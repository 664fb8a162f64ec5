// Int8 post-training quantization (docs/QUANTIZATION.md): the float model runs over calibration
// inputs, each activation that feeds a convolution or matrix product gets a scale and zero point from
// the ranges seen (min/max, a percentile, or the entropy-minimizing threshold), weights get int8
// scales per output channel (or per tensor), and the result is a standard QDQ model:
// QuantizeLinear -> DequantizeLinear pairs on those activations, int8 weights and int32 biases behind
// DequantizeLinear. `quantize` writes it as ONNX (onnxruntime and TensorRT read it); `ingot::convert`
// with Precision::INT8 compiles it into a package whose products run as fused integer kernels.
#pragma once
#include <ingot/export.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

INGOT_API_BEGIN
namespace ingot {

enum class CalibrationMethod { MinMax, Percentile, Entropy };

struct QuantizeSettings {
  // .npy files and folders of them. A model with one input: each file is one sample of it, or a batch
  // of samples stacked on axis 0 when the input's batch dim is 1. Several inputs: each folder is one
  // sample holding `<input name>.npy` per input.
  std::vector<std::string> calibration;
  CalibrationMethod method = CalibrationMethod::MinMax;
  double percentile = 99.999;  // CalibrationMethod::Percentile: the share of values inside the range
  bool per_channel = true;     // weight scales per output channel (false: one per tensor)
  bool symmetric = false;      // activations int8 with zero point 0 (false: uint8 with a zero point)
  // Op types ("Gemm") or node names left in float32, besides the ops without integer kernels.
  std::vector<std::string> keep_float;
  // Accuracy-driven mixed precision (0: off): while an output's cosine similarity to the float model
  // over the calibration samples is below this, the products whose own quantization lowers it most
  // stay in float32 (a few per round, up to 8 rounds).
  double min_cosine = 0;
  // Dynamic quantization: matrix products' weights int8, their activations quantized per call
  // (DynamicQuantizeLinear: uint8 from each call's own range); no calibration needed (given, it
  // measures the accuracy). Convolutions stay float32.
  bool dynamic = false;
  // Cross-layer equalization of depthwise -> 1x1 convolution pairs (nothing between them, or a Relu;
  // float function unchanged): each depthwise output channel scaled towards the tensor's largest
  // calibrated range, the 1x1 weights' input channels scaled back, so that one activation scale
  // serves every channel (BlazeFace, MobileNet-style blocks; docs/QUANTIZATION.md).
  bool equalize = true;
  // Empirical bias correction: each quantized convolution's / Gemm's bias absorbs the shift of its
  // output's per-channel mean that quantization causes (its own and the layers' before it), measured
  // on the calibration samples in the order of the graph (docs/QUANTIZATION.md).
  bool bias_correction = true;
  // Fixes symbolic dims of inputs before calibrating: {"x", {1, 3, 224, 224}}.
  std::vector<std::pair<std::string, std::vector<int64_t>>> input_shapes;
  // Progress of the long steps: ("calibrate" | "evaluate" | ..., samples done, samples in all;
  // "sensitivity", round, rounds at most; "bias correction", segment, segments).
  std::function<void(const std::string& step, int64_t done, int64_t total)> progress;
};

// Error of the quantized model against the float model on the calibration samples, per output.
struct OutputAccuracy {
  std::string name;
  double max_abs = 0, mean_abs = 0, cosine = 1;  // cosine similarity of the flattened outputs
};

struct QuantizeReport {
  int64_t samples = 0;
  int quantized = 0;                 // convolutions and matrix products quantized
  std::vector<std::string> kept_float;  // products left in float32, each with why
  std::vector<std::string> notes;       // e.g. an opset upgrade, or per-tensor weights and why
  std::vector<OutputAccuracy> outputs;
  std::string text() const;  // a readable table
  std::string json() const;
};

// Quantizes the ONNX model at `model_path` and writes the QDQ model to `qdq_path` (ONNX). Throws
// ingot::Error naming the model, the calibration file or the input at fault.
QuantizeReport quantize(const std::string& model_path, const std::string& qdq_path, const QuantizeSettings& settings);

}  // namespace ingot
INGOT_API_END
