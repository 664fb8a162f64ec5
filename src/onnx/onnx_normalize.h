// Models as the field writes them, made regular before import (and before ONNX's shape inference,
// which reads nodes in list order): what onnxruntime and other runtimes accept without a word.
#pragma once

namespace onnx {
class ModelProto;
}

namespace ingot {

// Sorts every graph's nodes (subgraphs too) topologically, keeping the file's order wherever it is
// already valid (a stable Kahn's algorithm, as onnxruntime does); a node that uses a value computed
// in a subgraph's outer scope waits for it too. A cycle fails naming its nodes.
void sort_nodes_topologically(onnx::ModelProto& proto);

// Whether ONNX's shape inference may run on the model: every value a node (or a graph output) reads
// is defined before it (a graph input, an initializer, an earlier node's output or an outer graph's
// value), and every node of a known op passes its schema's check (inputs, outputs, attributes).
// ONNX's inference assumes a checked model (it crashes on a Shape of an undefined value under data
// propagation, a Scan without its body); it runs only on models that pass, in a child process
// (onnx_import.cpp: its functions still read past their checks on some hostile models), and
// Ingot's verifier then names what is wrong with the others.
bool checked_for_shape_inference(const onnx::ModelProto& proto);

}  // namespace ingot
