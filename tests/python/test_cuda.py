"""The Python module on a GPU (skipped without one; run on the GPU machine by scripts/gpu-test.sh's
`python` part): DLPack both ways with PyTorch's CUDA tensors without copies (the same device
pointer), sessions fed with CUDA tensors, and the CUDA custom-op example (examples/custom-op) eagerly
and under autograd against PyTorch."""
import os

import numpy as np
import pytest

import ingot

from conftest import ROOT

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)


def test_dlpack_round_trip_shares_device_memory():
    t = torch.rand(64, 33, device="cuda")
    x = ingot.from_dlpack(t)
    assert x.device == "cuda:0" and x.data_ptr == t.data_ptr()
    back = torch.from_dlpack(x)
    assert back.data_ptr() == t.data_ptr()
    y = ingot.op("Relu", x)  # computed by Ingot on the GPU, handed to PyTorch without a copy
    ty = torch.from_dlpack(y)
    assert ty.device.type == "cuda" and ty.data_ptr() == y.data_ptr
    torch.testing.assert_close(ty, torch.relu(t), rtol=0, atol=0)


def test_a_session_takes_cuda_tensors(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import helper, TensorProto
    graph = helper.make_graph([helper.make_node("Tanh", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = str(tmp_path / "tanh.onnx")
    onnx.save(model, path)
    s = ingot.Session(path, device="cuda", outputs_on_device=True)
    t = torch.randn(16, 8, device="cuda")
    y = s.run({"x": t})["y"]
    assert y.device == "cuda:0"
    assert s.last_run_stats()["host_to_device_bytes"] == 0  # the input was used where it was
    torch.testing.assert_close(torch.from_dlpack(y), torch.tanh(t), rtol=1e-6, atol=1e-6)


def test_the_cuda_custom_op_eagerly_and_under_autograd(tmp_path):
    ex = os.path.join(ROOT, "examples", "custom-op")
    cache = tmp_path / "cache"
    ext = ingot.load_extension("softshrink_cuda_test", [os.path.join(ex, "softshrink.cpp"), os.path.join(ex, "softshrink.cu")],
                               extra_cflags=["-DWITH_CUDA"], build_directory=str(cache))
    xt = torch.randn(1000, 37, device="cuda", requires_grad=True)  # 37: not a multiple of 4 (the vector tail)
    x = ingot.from_dlpack(xt.detach())
    x.requires_grad = True
    y = ext.Softshrink(x, lambd=0.3)
    assert y.device == "cuda:0"
    yt = torch.nn.functional.softshrink(xt, 0.3)
    torch.testing.assert_close(torch.from_dlpack(y), yt.detach(), rtol=0, atol=0)
    w = torch.randn(1000, 37, device="cuda")
    ingot.op("ReduceSum", y * ingot.from_dlpack(w), keepdims=0).backward()
    (yt * w).sum().backward()
    torch.testing.assert_close(torch.from_dlpack(x.grad), xt.grad, rtol=0, atol=0)
    # An unaligned view (a row offset of 1 element) takes the scalar kernel.
    off = ingot.from_dlpack(xt.detach().reshape(-1)[1:1 + 4096])
    assert off.data_ptr % 16 == 4
    torch.testing.assert_close(torch.from_dlpack(ext.Softshrink(off, lambd=0.3)),
                               torch.nn.functional.softshrink(torch.from_dlpack(off), 0.3), rtol=0, atol=0)


def test_cupy_arrays_cross_without_copies():
    cupy = pytest.importorskip("cupy")
    a = cupy.arange(12, dtype=cupy.float32).reshape(3, 4) - 5
    x = ingot.from_dlpack(a)
    assert x.device == "cuda:0" and x.data_ptr == a.data.ptr
    y = ingot.op("Relu", x)
    b = cupy.from_dlpack(y)
    assert b.data.ptr == y.data_ptr
    cupy.testing.assert_array_equal(b, cupy.maximum(a, 0))
