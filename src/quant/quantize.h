// Post-training quantization inside the library: calibration samples, the float model prepared and
// calibrated, QuantizeLinear/DequantizeLinear inserted (what `ingot quantize` writes as ONNX and
// `ingot convert --precision int8` compiles), and the accuracy of the result. docs/QUANTIZATION.md.
#pragma once
#include <ingot/quantize.h>

#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace ingot::quant {

using Sample = std::vector<Tensor>;  // one value per graph input, in graph-input order

// Imports `path` for quantization: the opset raised to 13 where per-channel weights need it (per-axis
// DequantizeLinear), else to 10 (QuantizeLinear's first); input shapes fixed; notes in `report`.
// `onnx_output`: the QDQ model is written as ONNX, so per-axis parameters need opset 13 (a model the
// converter cannot raise gets per-tensor weights); a package (false) keeps them per channel anyway.
std::shared_ptr<Model> import_for_quantization(const std::string& path, const QuantizeSettings& settings,
                                               QuantizeReport& report, bool onnx_output);

// Reads the calibration inputs of `model` (QuantizeSettings::calibration). Errors name the file or
// folder and the input.
std::vector<Sample> load_calibration(const Model& model, const std::vector<std::string>& paths);

// Turns `model` (imported by import_for_quantization) into its QDQ form in place: preparation passes
// (constant and BatchNormalization folding), calibration over `samples`, then QuantizeLinear ->
// DequantizeLinear on every activation a convolution or matrix product reads and int8 weights /
// int32 biases behind DequantizeLinear.
void quantize_model(Model& model, const std::vector<Sample>& samples, const QuantizeSettings& settings,
                    QuantizeReport& report, bool onnx_output);

// Fills report.outputs: `quantized` against `reference`, both run on the CPU over `samples`.
void evaluate(std::shared_ptr<const Model> reference, std::shared_ptr<const Model> quantized,
              const std::vector<Sample>& samples, const QuantizeSettings& settings, QuantizeReport& report);

}  // namespace ingot::quant
