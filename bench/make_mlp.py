#!/usr/bin/python3
"""Writes a MatMul-heavy float32 ONNX model for the dynamic quantization benchmark (bench/int8.sh):
x [BATCH, 512] -> 4 x (MatMul 1024 + Add bias + Relu) -> MatMul 256 + Add, weights from a fixed seed.

Usage: /usr/bin/python3 bench/make_mlp.py OUT.onnx INPUT.npy [BATCH]
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    out, input_path = sys.argv[1], sys.argv[2]
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    rng = np.random.default_rng(7)
    widths = [512, 1024, 1024, 1024, 1024, 256]
    nodes, inits, x = [], [], "x"
    for i in range(len(widths) - 1):
        w = (rng.standard_normal((widths[i], widths[i + 1])) / np.sqrt(widths[i])).astype(np.float32)
        b = (0.1 * rng.standard_normal(widths[i + 1])).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]), helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"])]
        x = f"a{i}"
        if i < len(widths) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"]))
            x = f"r{i}"
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 512])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 256])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), out)
    np.save(input_path, rng.standard_normal((batch, 512)).astype(np.float32))


if __name__ == "__main__":
    main()
