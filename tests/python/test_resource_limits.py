"""Resource limits (issue: reliability): a model or input that declares more than the machine has
fails with a clear error instead of an OOM kill or a hang. Each model is made here with onnx.helper."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import ingot


def save(tmp_path, nodes, inputs, outputs, initializers=()):
    graph = h.make_graph(nodes, "limits", inputs, outputs, initializer=list(initializers))
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    path = os.path.join(tmp_path, "model.onnx")
    onnx.save(m, path)
    return path


def constant_of_shape(tmp_path, dims):
    shape = nh.from_array(np.array(dims, np.int64), "shape")
    return save(tmp_path, [h.make_node("ConstantOfShape", ["shape"], ["y"])], [],
                [h.make_tensor_value_info("y", T.FLOAT, None)], [shape])


def test_a_tensor_of_a_trillion_elements_is_refused_by_size(tmp_path):
    session = ingot.Session(constant_of_shape(tmp_path, [1000000, 1000000]))
    with pytest.raises(ingot.Error, match=r"cannot allocate 4\.0 TB for a float32 tensor: .* the memory limit is"):
        session.run({})


def test_a_shape_past_64_bits_is_refused(tmp_path):
    session = ingot.Session(constant_of_shape(tmp_path, [1 << 40, 1 << 40]))
    with pytest.raises(ingot.Error, match="more elements than 64 bits count"):
        session.run({})


def test_expanding_an_input_to_a_huge_shape_is_refused(tmp_path):
    shape = nh.from_array(np.array([1 << 20, 1 << 20], np.int64), "shape")
    path = save(tmp_path, [h.make_node("Expand", ["x", "shape"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [1])],
                [h.make_tensor_value_info("y", T.FLOAT, None)], [shape])
    with pytest.raises(ingot.Error, match=r"node .*Expand.*cannot allocate 4\.4 TB"):
        ingot.Session(path).run({"x": np.ones(1, np.float32)})


def loop_model(tmp_path, trip_count, scan_size):
    """y = x after `trip_count` iterations of an identity body; with scan_size > 0 each iteration
    also emits a scan output of that many floats (they accumulate)."""
    body_nodes = [h.make_node("Identity", ["cond_in"], ["cond_out"]), h.make_node("Identity", ["v_in"], ["v_out"])]
    body_outputs = [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("v_out", T.FLOAT, [1])]
    initializers = [nh.from_array(np.array(trip_count, np.int64), "M"), nh.from_array(np.array(True), "cond")]
    outputs = [h.make_tensor_value_info("y", T.FLOAT, [1])]
    if scan_size:
        body_nodes.append(h.make_node("ConstantOfShape", ["scan_shape"], ["s"]))
        body_outputs.append(h.make_tensor_value_info("s", T.FLOAT, [scan_size]))
        initializers.append(nh.from_array(np.array([scan_size], np.int64), "scan_shape"))
        outputs.append(h.make_tensor_value_info("scans", T.FLOAT, None))
    body = h.make_graph(body_nodes, "body",
                        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
                         h.make_tensor_value_info("v_in", T.FLOAT, [1])], body_outputs)
    loop = h.make_node("Loop", ["M", "cond", "x"], ["y"] + (["scans"] if scan_size else []), body=body)
    return save(tmp_path, [loop], [h.make_tensor_value_info("x", T.FLOAT, [1])], outputs, initializers)


def test_a_loop_with_an_enormous_trip_count_stops_at_the_time_limit(tmp_path):
    session = ingot.Session(loop_model(tmp_path, 1 << 62, 0), time_limit_s=0.5)
    with pytest.raises(ingot.Error, match=r"node .*Loop.*took longer than its time limit of 0\.5 s"):
        session.run({"x": np.ones(1, np.float32)})
    # The same session still runs what fits in the limit.
    short = ingot.Session(loop_model(tmp_path, 3, 0), time_limit_s=10)
    np.testing.assert_array_equal(short.run({"x": np.ones(1, np.float32)})["y"].numpy(), [1.0])


def test_a_loop_that_accumulates_past_the_memory_limit_is_refused(tmp_path):
    path = loop_model(tmp_path, 1 << 62, 1 << 16)  # 256 KB per iteration
    default = ingot.memory_limit()
    try:
        session = ingot.Session(path, memory_limit_bytes=256 << 20)
        assert ingot.memory_limit() == 256 << 20
        with pytest.raises(ingot.Error, match="the memory limit is 268.4 MB"):
            session.run({"x": np.ones(1, np.float32)})
        assert ingot.memory_in_use() < 16 << 20  # what the loop had accumulated was freed
    finally:
        ingot.set_memory_limit(0)  # process-wide: back to the default
    assert ingot.memory_limit() == default


def test_bad_limits_are_refused(tmp_path):
    path = loop_model(tmp_path, 1, 0)
    with pytest.raises(ingot.Error, match="time_limit_s must be 0"):
        ingot.Session(path, time_limit_s=-1)
    with pytest.raises(ingot.Error, match="memory_limit_bytes must be positive"):
        ingot.Session(path, memory_limit_bytes=-5)


# Regressions of what the fuzzers found (docs/RELIABILITY.md), each as a small model or file.

def test_a_tensor_declared_without_its_data_is_refused_before_allocating(tmp_path):
    big = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[1 << 31])  # 2^31 floats declared, none stored
    path = save(tmp_path, [h.make_node("Identity", ["w"], ["y"])], [], [h.make_tensor_value_info("y", T.FLOAT, None)],
                [big])
    before = ingot.memory_in_use()
    with pytest.raises(ingot.Error, match=r"tensor 'w': holds 0 values but its shape \[2147483648\] needs 2147483648"):
        ingot.Session(path)
    assert ingot.memory_in_use() - before < 1 << 20


def test_an_npy_with_a_bad_dimension_is_an_error(tmp_path):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(os.path.join(tmp_path, "bad.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
    cli = os.environ.get("INGOT_CLI")
    if not cli:
        pytest.skip("INGOT_CLI not set (ctest sets it)")
    import subprocess

    model = save(tmp_path, [h.make_node("Relu", ["x"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [2, 2])],
                 [h.make_tensor_value_info("y", T.FLOAT, [2, 2])])
    r = subprocess.run([cli, "run", model, "--input", f"x={tmp_path}/bad.npy"], capture_output=True, text=True)
    assert r.returncode == 1 and "shape has a bad dimension ' x'" in r.stderr, r.stderr


@pytest.mark.parametrize("op,extra", [("Slice", ["starts", "ends"]), ("ReduceSum", ["axes"])])
def test_an_axis_of_a_scalar_is_an_error(tmp_path, op, extra):
    inits = [nh.from_array(np.array([0], np.int64), name) for name in extra]
    path = save(tmp_path, [h.make_node(op, ["x"] + extra, ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [])],
                [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    with pytest.raises(ingot.Error, match="scalar|out of range for rank 0"):
        ingot.Session(path).run({"x": np.array(1.0, np.float32)})


def test_log_sum_exp_of_an_empty_integer_slice_saturates(tmp_path):
    axes = nh.from_array(np.array([1], np.int64), "axes")
    path = save(tmp_path, [h.make_node("ReduceLogSumExp", ["x", "axes"], ["y"], keepdims=0)],
                [h.make_tensor_value_info("x", T.INT32, [2, 0])], [h.make_tensor_value_info("y", T.INT32, None)], [axes])
    y = ingot.Session(path).run({"x": np.zeros((2, 0), np.int32)})["y"].numpy()
    np.testing.assert_array_equal(y, [np.iinfo(np.int32).min] * 2)  # log(0) = -inf, saturated


def test_stft_of_a_signal_that_is_not_rank_3_is_an_error(tmp_path):
    step = nh.from_array(np.array(2, np.int64), "step")
    path = save(tmp_path, [h.make_node("STFT", ["x", "step", "", "len"], ["y"])],
                [h.make_tensor_value_info("x", T.FLOAT, [4])], [h.make_tensor_value_info("y", T.FLOAT, None)],
                [step, nh.from_array(np.array(2, np.int64), "len")])
    with pytest.raises(ingot.Error):
        ingot.Session(path).run({"x": np.ones(4, np.float32)})


@pytest.mark.parametrize("op,x,y,want", [
    ("Pow", np.array([10], np.int32), np.array([80.0], np.float32), [np.iinfo(np.int32).max]),  # saturates
    ("Shrink", np.array([1], np.uint8), None, [0]),                                             # 1 - 3 saturates at 0
])
def test_integer_results_of_float_math_saturate(tmp_path, op, x, y, want):
    dtype = {np.int32: T.INT32, np.uint8: T.UINT8}[x.dtype.type]
    inputs = [h.make_tensor_value_info("x", dtype, list(x.shape))]
    feeds = {"x": x}
    attrs = {"bias": 3.0, "lambd": 0.5} if op == "Shrink" else {}
    names = ["x"]
    if y is not None:
        inputs.append(h.make_tensor_value_info("p", T.FLOAT, list(y.shape)))
        feeds["p"] = y
        names.append("p")
    path = save(tmp_path, [h.make_node(op, names, ["y"], **attrs)], inputs, [h.make_tensor_value_info("y", dtype, None)])
    np.testing.assert_array_equal(ingot.Session(path).run(feeds)["y"].numpy(), want)


def test_a_range_of_nan_is_empty_and_an_endless_one_an_error(tmp_path):
    inputs = [h.make_tensor_value_info(n, T.FLOAT, []) for n in ("a", "b", "d")]
    path = save(tmp_path, [h.make_node("Range", ["a", "b", "d"], ["y"])], inputs, [h.make_tensor_value_info("y", T.FLOAT, None)])
    s = ingot.Session(path)
    f = lambda v: np.array(v, np.float32)  # noqa: E731
    assert s.run({"a": f(0), "b": f(np.nan), "d": f(1)})["y"].numpy().shape == (0,)
    with pytest.raises(ingot.Error, match="endless range"):
        s.run({"a": f(0), "b": f(np.inf), "d": f(1)})


def test_a_convolution_whose_weight_rank_differs_is_an_error_not_a_crash(tmp_path):
    # ONNX 1.12's shape inference crashed on this model; Ingot skips it and names the problem.
    path = save(tmp_path, [h.make_node("ConvTranspose", ["x", "w"], ["y"])],
                [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 3, 4, 5]), h.make_tensor_value_info("w", T.FLOAT, [1])],
                [h.make_tensor_value_info("y", T.FLOAT, None)])
    with pytest.raises(ingot.Error):
        ingot.Session(path).run({"x": np.zeros((1, 1, 3, 4, 5), np.float32), "w": np.zeros(1, np.float32)})


def test_a_layer_normalization_axis_out_of_range_is_an_error_not_a_crash(tmp_path):
    # ONNX 1.12's shape inference reads past the input's dims here (found by fuzz/graph_fuzzer.cpp).
    # It runs in a child process (src/core/isolated.h): its crash costs only the static types.
    path = save(tmp_path, [h.make_node("LayerNormalization", ["x", "scale"], ["y"], axis=-3)],
                [h.make_tensor_value_info("x", T.FLOAT, [2, 3])], [h.make_tensor_value_info("y", T.FLOAT, None)],
                [nh.from_array(np.ones(3, np.float32), "scale")])
    with pytest.raises(ingot.Error, match="axis"):
        ingot.Session(path).run({"x": np.ones((2, 3), np.float32)})


@pytest.mark.parametrize("op,dtype", [("Mul", np.uint16), ("Mul", np.int16), ("Add", np.int32), ("Sub", np.int64),
                                      ("Mul", np.int64), ("Sum", np.int32), ("ReduceSum", np.int64),
                                      ("ReduceProd", np.int32), ("ReduceL1", np.int64)])
def test_integer_arithmetic_wraps_like_numpy(tmp_path, op, dtype):
    # Signed overflow (and a 16-bit product promoted to int) was undefined behaviour in C++ (found by
    # fuzz/graph_fuzzer.cpp: uint16 65531 * 65531); integers wrap, as numpy computes them.
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, info.max - 4, 3], dtype)
    y = np.array([info.max, -1 if info.min < 0 else 7, info.max - 4, info.max], dtype)
    t = {np.uint16: T.UINT16, np.int16: T.INT16, np.int32: T.INT32, np.int64: T.INT64}[dtype]
    reduce = op.startswith("Reduce")
    names = ["x"] if reduce else ["x", "y"]
    inputs = [h.make_tensor_value_info(n, t, [4]) for n in names]
    path = save(tmp_path, [h.make_node(op, names, ["z"], keepdims=0) if reduce else h.make_node(op, names, ["z"])],
                inputs, [h.make_tensor_value_info("z", t, None)])
    feeds = {"x": x} if reduce else {"x": x, "y": y}
    got = ingot.Session(path).run(feeds)["z"].numpy()
    with np.errstate(over="ignore"):
        want = {"Mul": lambda: x * y, "Add": lambda: x + y, "Sub": lambda: x - y, "Sum": lambda: x + y,
                "ReduceSum": lambda: np.sum(x, dtype=dtype), "ReduceProd": lambda: np.prod(x, dtype=dtype),
                "ReduceL1": lambda: np.sum(np.abs(x), dtype=dtype)}[op]()
    np.testing.assert_array_equal(got, want)
