// ONNX export: Model -> ModelProto, the inverse of onnx_import.h, for models traced from nn modules
// (nn::export_onnx, include/ingot/nn.h).
#pragma once
#include <string>

#include "graph/graph.h"

namespace ingot {

// Writes `model` as an ONNX file: weights inline (raw_data), value_info with the known types, the
// model's opsets. ONNX's checker runs on the result first; what it rejects, or a node outside the
// ONNX domains (ai.onnx, ai.onnx.ml), is an ingot::Error naming the node, and nothing is written.
void save_onnx(const Model& model, const std::string& path);

}  // namespace ingot
