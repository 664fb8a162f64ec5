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

}  // namespace ingot
