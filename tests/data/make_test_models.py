#!/usr/bin/python3
"""Writes the tiny hand-made models the CLI error tests use. Run from this folder:
    /usr/bin/python3 make_test_models.py
"""
import onnx
from onnx import TensorProto, helper

# An op no runtime implements: loading must fail naming it.
node = helper.make_node("FrobnicateTensor", ["x"], ["y"], name="mystery", domain="")
graph = helper.make_graph(
    [node], "unsupported_op",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="ingot-tests")
onnx.save(model, "unsupported_op.onnx")
