"""Models as the field writes them (issue: reliability): each quirk in a model this file makes with
onnx.helper, run by Ingot and compared with numpy's result of the same math (or a clear error where
the model must be refused). onnxruntime loads every accepted one too."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import ingot

X = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)


def model(nodes, inputs=None, outputs=None, initializers=(), value_info=(), opsets=(("", 17),), ir_version=8):
    inputs = inputs or [h.make_tensor_value_info("x", T.FLOAT, [2, 3])]
    outputs = outputs or [h.make_tensor_value_info("y", T.FLOAT, [2, 3])]
    graph = h.make_graph(nodes, "quirks", inputs, outputs, initializer=list(initializers), value_info=list(value_info))
    m = h.make_model(graph, opset_imports=[h.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = ir_version
    return m


def run(tmp_path, m, feeds=None, name="model.onnx"):
    path = os.path.join(tmp_path, name)
    onnx.save(m, path)
    return ingot.Session(path).run(feeds or {"x": X})["y"].numpy()


def test_nodes_in_any_order_are_sorted(tmp_path):
    # y = Neg(Relu(x) + 1): listed consumer first, as some converters write it.
    nodes = [
        h.make_node("Neg", ["b"], ["y"], name="neg"),
        h.make_node("Add", ["a", "one"], ["b"], name="add"),
        h.make_node("Relu", ["x"], ["a"], name="relu"),
    ]
    one = nh.from_array(np.array(1.0, np.float32), "one")
    np.testing.assert_array_equal(run(tmp_path, model(nodes, initializers=[one])), -(np.maximum(X, 0) + 1))


def test_a_subgraph_that_reads_a_later_listed_node_waits_for_it(tmp_path):
    # If's branches read 'a' from the outer scope; the node computing 'a' is listed after the If.
    then_g = h.make_graph([h.make_node("Neg", ["a"], ["t"])], "then", [], [h.make_tensor_value_info("t", T.FLOAT, [2, 3])])
    else_g = h.make_graph([h.make_node("Abs", ["a"], ["e"])], "else", [], [h.make_tensor_value_info("e", T.FLOAT, [2, 3])])
    nodes = [
        h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
        h.make_node("Relu", ["x"], ["a"]),
    ]
    inputs = [h.make_tensor_value_info("x", T.FLOAT, [2, 3]), h.make_tensor_value_info("c", T.BOOL, [])]
    got = run(tmp_path, model(nodes, inputs=inputs), {"x": X, "c": np.array(True)})
    np.testing.assert_array_equal(got, -np.maximum(X, 0))


def test_a_cycle_is_refused_naming_its_nodes(tmp_path):
    nodes = [h.make_node("Relu", ["b"], ["a"], name="first"), h.make_node("Add", ["a", "x"], ["b"], name="second"),
             h.make_node("Neg", ["a"], ["y"])]
    with pytest.raises(ingot.Error, match="'first', 'second' depend on each other in a cycle"):
        run(tmp_path, model(nodes))


def test_duplicate_and_empty_node_names(tmp_path):
    nodes = [h.make_node("Relu", ["x"], ["a"], name="n"), h.make_node("Neg", ["a"], ["b"], name="n"),
             h.make_node("Abs", ["b"], ["c"], name=""), h.make_node("Neg", ["c"], ["y"], name="Abs_2")]
    np.testing.assert_array_equal(run(tmp_path, model(nodes)), -np.abs(-np.maximum(X, 0)))


def test_unused_initializers(tmp_path):
    unused = nh.from_array(np.ones((64, 64), np.float32), "unused")
    np.testing.assert_array_equal(run(tmp_path, model([h.make_node("Relu", ["x"], ["y"])], initializers=[unused])),
                                  np.maximum(X, 0))


def test_an_initializer_that_shadows_an_input_is_its_value(tmp_path):
    # IR >= 4: an initializer listed among the inputs gives that input's value (Ingot keeps it a
    # constant, so the graph passes can fold it; feeding it is refused by name).
    b = np.array([1.0, 2.0, 3.0], np.float32)
    inputs = [h.make_tensor_value_info("x", T.FLOAT, [2, 3]), h.make_tensor_value_info("b", T.FLOAT, [3])]
    m = model([h.make_node("Add", ["x", "b"], ["y"])], inputs=inputs, initializers=[nh.from_array(b, "b")])
    np.testing.assert_array_equal(run(tmp_path, m), X + b)
    session = ingot.Session(os.path.join(tmp_path, "model.onnx"))
    assert [i[0] for i in session.inputs] == ["x"]
    with pytest.raises(ingot.Error, match="no input named 'b'"):
        session.run({"x": X, "b": b})


def test_value_info_that_disagrees_with_inference(tmp_path):
    # The file claims the intermediate is int64[7]; it is float32[2,3].
    wrong = h.make_tensor_value_info("a", T.INT64, [7])
    m = model([h.make_node("Relu", ["x"], ["a"]), h.make_node("Neg", ["a"], ["y"])], value_info=[wrong])
    np.testing.assert_array_equal(run(tmp_path, m), -np.maximum(X, 0))


def test_an_opset_imported_twice_uses_the_highest(tmp_path):
    # ReduceSum takes its axes as an input from opset 13 on (an attribute before).
    axes = nh.from_array(np.array([1], np.int64), "axes")
    m = model([h.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)], initializers=[axes],
              outputs=[h.make_tensor_value_info("y", T.FLOAT, [2, 1])], opsets=(("", 11), ("", 13)))
    np.testing.assert_array_equal(run(tmp_path, m), X.sum(axis=1, keepdims=True))


def external_model(location):
    w = nh.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    w.data_location = T.EXTERNAL
    w.ClearField("raw_data")
    for key, value in (("location", location), ("offset", "0"), ("length", "24")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    return model([h.make_node("Add", ["x", "w"], ["y"])], initializers=[w])


def test_external_data_relative_to_the_models_folder(tmp_path):
    os.makedirs(os.path.join(tmp_path, "weights"))
    np.arange(6, dtype=np.float32).tofile(os.path.join(tmp_path, "weights", "w.bin"))
    np.testing.assert_array_equal(run(tmp_path, external_model("weights/w.bin")),
                                  X + np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("location", ["../outside.bin", "weights/../../outside.bin", "/etc/hostname", "link.bin"])
def test_external_data_outside_the_models_folder_is_refused(tmp_path, location):
    model_dir = os.path.join(tmp_path, "model")
    os.makedirs(model_dir)
    np.zeros(6, np.float32).tofile(os.path.join(tmp_path, "outside.bin"))  # exists, and must not be read
    os.symlink(os.path.join(tmp_path, "outside.bin"), os.path.join(model_dir, "link.bin"))
    with pytest.raises(ingot.Error, match="outside the model's folder"):
        run(model_dir, external_model(location))


def test_external_data_with_a_bad_offset_is_refused(tmp_path):
    m = external_model("w.bin")
    m.graph.initializer[0].external_data[1].value = "-8"
    np.zeros(6, np.float32).tofile(os.path.join(tmp_path, "w.bin"))
    with pytest.raises(ingot.Error, match="offset '-8' is not a byte count"):
        run(tmp_path, m)
