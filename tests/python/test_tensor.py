"""Tensors in and out of Ingot: numpy and DLPack without copies (the same data pointer), dtypes,
lifetimes, and clear errors. PyTorch is Debian's python3-torch (CPU)."""
import gc

import numpy as np
import pytest

import ingot

torch = pytest.importorskip("torch")


def test_numpy_in_and_out_share_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = ingot.tensor(a)
    assert t.shape == (3, 4) and t.dtype == "float32" and t.device == "cpu"
    assert t.data_ptr == a.ctypes.data
    b = t.numpy()
    assert b.ctypes.data == a.ctypes.data
    a[1, 2] = 100.0  # one buffer: the write shows through both
    assert b[1, 2] == 100.0
    c = np.from_dlpack(t)
    assert c.ctypes.data == a.ctypes.data
    np.testing.assert_array_equal(np.asarray(t), a)


def test_the_wrapped_memory_outlives_its_python_object():
    a = np.full((1000,), 7, dtype=np.int64)
    t = ingot.tensor(a)
    del a
    gc.collect()
    assert int(t.numpy().sum()) == 7000
    b = t.numpy()
    del t
    gc.collect()
    assert int(b.sum()) == 7000


def test_non_contiguous_numpy_is_copied_contiguously():
    a = np.arange(24, dtype=np.float64).reshape(4, 6)[:, ::2]
    t = ingot.tensor(a)
    np.testing.assert_array_equal(t.numpy(), a)


def test_dlpack_round_trips_with_pytorch_without_copies():
    x = torch.arange(20, dtype=torch.float32).reshape(4, 5)
    t = ingot.from_dlpack(x)
    assert t.data_ptr == x.data_ptr()
    y = torch.from_dlpack(t)
    assert y.data_ptr() == x.data_ptr()
    y[0, 0] = -3.0
    assert x[0, 0].item() == -3.0
    # Any object with __dlpack__ is taken as is by tensor() and Session.run too.
    assert ingot.tensor(x).data_ptr == x.data_ptr()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int8, torch.uint8])
def test_dlpack_dtypes(dtype):
    x = (torch.arange(6) % 3).to(dtype).reshape(2, 3)
    t = ingot.from_dlpack(x)
    assert t.data_ptr == x.data_ptr()
    back = torch.from_dlpack(t)
    assert back.dtype == dtype
    assert torch.equal(back, x)
    # numpy has no bfloat16: numpy() widens it.
    want = x.float().numpy() if dtype == torch.bfloat16 else x.numpy()
    np.testing.assert_array_equal(t.numpy(), want)


def test_bool_tensors_through_numpy():
    a = np.array([[True, False, True]])
    t = ingot.tensor(a)
    assert t.dtype == "bool" and t.data_ptr == a.ctypes.data
    np.testing.assert_array_equal(ingot.op("Not", t).numpy(), ~a)


def test_a_strided_dlpack_tensor_is_refused_by_name():
    x = torch.arange(12.0).reshape(3, 4).t()
    with pytest.raises(ingot.Error, match="not contiguous"):
        ingot.from_dlpack(x)


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ingot.Error, match="numpy dtype"):
        ingot.tensor(np.array([1 + 2j]))
    with pytest.raises(ingot.Error, match="unknown dtype"):
        ingot.zeros([2], dtype="float7")
    with pytest.raises(ingot.Error, match="NoSuchOp"):
        ingot.op("NoSuchOp", np.zeros(2, np.float32))


def test_eager_ops_and_attributes():
    x = ingot.tensor(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
    w = ingot.tensor(np.ones((1, 1, 3, 3), np.float32))
    y = ingot.op("Conv", x, w, pads=[1, 1, 1, 1])
    want = torch.nn.functional.conv2d(torch.from_numpy(x.numpy()), torch.ones(1, 1, 3, 3), padding=1)
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-6)
    values, indices = ingot.op("TopK", ingot.tensor(np.array([3.0, 1.0, 2.0], np.float32)), np.array([2], np.int64))
    assert values.numpy().tolist() == [3.0, 2.0] and indices.numpy().tolist() == [0, 2]
    s = (x * 2 + 1 - x) / 2
    np.testing.assert_allclose(s.numpy(), (x.numpy() + 1) / 2)
