// ONNX import: ModelProto -> Model, and TensorProto/SequenceProto files -> values.
#pragma once
#include <memory>
#include <string>

#include "graph/graph.h"
#include "ops/kernel.h"

namespace ingot {

// Parses, converts and verifies an ONNX model (external-data tensors are read relative to the
// model's folder). ONNX's own shape inference fills Graph::value_info with symbolic shapes.
// Throws ingot::Error naming the file for anything malformed or unsupported.
std::shared_ptr<Model> import_onnx(const std::string& path);
// The same, with the default domain's opset raised to `opset` first when it is lower, by ONNX's
// version converter (the quantizer: per-axis DequantizeLinear needs opset 13). A model the converter
// cannot raise is imported as it is, and `note` says why.
std::shared_ptr<Model> import_onnx(const std::string& path, int opset, std::string& note);

// Reads a serialized TensorProto (.pb). `expected` decides how to read a SequenceProto or
// OptionalProto (ONNX test data for sequence/optional inputs).
Value load_value_pb(const std::string& path, const ValueType& expected);
Tensor load_tensor_pb(const std::string& path);

// Gives libonnx a schema for each catalogue op outside ONNX's domains that has a shape rule
// (extension ops), once, so that its shape inference runs through them (onnx_schema.cpp). The
// importer calls it before inferring.
void register_shape_rule_schemas();

}  // namespace ingot
