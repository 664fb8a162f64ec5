"""Sessions from Python: ONNX's own node tests (their expected outputs), the real models against the
onnxruntime references in tests/models/reference, packages, the profiler, and clear errors."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ingot
from conftest import ONNX_NODE_TESTS, ROOT

onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


@pytest.mark.parametrize("case", ["test_conv_with_strides_padding", "test_matmul_3d", "test_softmax_axis_1",
                                  "test_gather_1", "test_resize_upsample_scales_linear"])
def test_onnx_node_cases(case):
    folder = os.path.join(ONNX_NODE_TESTS, case)
    if not os.path.isdir(folder):
        pytest.skip(f"{folder} missing (libonnx-testdata)")
    session = ingot.Session(os.path.join(folder, "model.onnx"))
    data = os.path.join(folder, "test_data_set_0")
    inputs = [load_pb(os.path.join(data, f"input_{i}.pb")) for i in range(len(session.inputs))]
    outputs = session.run(inputs)  # a list in input order
    for i, (name, _, _) in enumerate(session.outputs):
        np.testing.assert_allclose(outputs[name].numpy(), load_pb(os.path.join(data, f"output_{i}.pb")), rtol=1e-5,
                                   atol=1e-6)


def find_file(root, name):
    for directory, _, files in sorted(os.walk(root)):
        if name in files:
            return os.path.join(directory, name)
    return None


@pytest.fixture(scope="module")
def model_inputs(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("inputs"))
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "models", "make_inputs.py"), folder], check=True,
                   capture_output=True)
    return folder


@pytest.mark.parametrize("name", ["blazeface_front128", "ppocr_cls"])
def test_real_models_against_onnxruntime(name, model_cache, model_inputs, tmp_path):
    with open(os.path.join(ROOT, "tests", "models", "models.json")) as f:
        model = next(m for m in json.load(f)["models"] if m["name"] == name)
    path = find_file(model_cache, model["file"])
    if path is None:
        pytest.skip(f"{model['file']} not in {model_cache}")
    reference = os.path.join(ROOT, "tests", "models", "reference", name)
    with open(os.path.join(reference, "outputs.json")) as f:
        names = json.load(f)["outputs"]
    feeds = {k: np.load(os.path.join(model_inputs, v)) for k, v in model["inputs"].items()}
    for source in (path, "cli", "python"):  # the ONNX model, then its package made by the CLI and by ingot.convert
        if source == "cli":
            source = str(tmp_path / f"{name}.ingot")
            cli = os.environ.get("INGOT_CLI", os.path.join(ROOT, "build", "tools", "ingot", "ingot"))
            subprocess.run([cli, "convert", path, "-o", source, "-q"], check=True, capture_output=True)
        elif source == "python":
            source, steps = str(tmp_path / f"{name}.py.ingot"), []
            r = ingot.convert(path, source, progress=lambda step, done, note: steps.append((step, done)))
            assert r["path"] == source and r["device"] == "cpu" and r["bytes"] == os.path.getsize(source)
            assert [s for s, done in steps if done] == ["import", "passes", "precision", "writing"]
        session = ingot.Session(source)
        out = session.run(feeds)
        assert list(out) == names
        for i, n in enumerate(names):
            want = np.load(os.path.join(reference, f"output_{i}.npy"))
            np.testing.assert_allclose(out[n].numpy(), want, atol=1e-4, rtol=1e-3, err_msg=f"{source}: {n}")


def test_feeds_from_pytorch_are_not_copied():
    torch = pytest.importorskip("torch")
    folder = os.path.join(ONNX_NODE_TESTS, "test_matmul_2d")
    if not os.path.isdir(folder):
        pytest.skip("libonnx-testdata missing")
    session = ingot.Session(os.path.join(folder, "model.onnx"))
    a, b = torch.rand(3, 4), torch.rand(4, 3)
    out = session.run({session.inputs[0][0]: a, session.inputs[1][0]: b})
    np.testing.assert_allclose(out[session.outputs[0][0]].numpy(), (a @ b).numpy(), rtol=1e-5)
    assert session.last_run_stats()["copies"] == 0


def test_errors_name_what_is_at_fault(tmp_path):
    with pytest.raises(ingot.Error, match="nope.onnx"):
        ingot.Session(str(tmp_path / "nope.onnx"))
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ingot.Error, match="bad.onnx"):
        ingot.Session(str(bad))
    folder = os.path.join(ONNX_NODE_TESTS, "test_matmul_2d")
    if os.path.isdir(folder):
        session = ingot.Session(os.path.join(folder, "model.onnx"))
        name = session.inputs[0][0]
        with pytest.raises(ingot.Error, match=f"input '{name}': expected shape"):
            session.run({name: np.zeros((5, 5), np.float32), session.inputs[1][0]: np.zeros((4, 3), np.float32)})
    with pytest.raises(ingot.Error):
        ingot.Session(os.path.join(ONNX_NODE_TESTS, "test_matmul_2d", "model.onnx"), precision="fp8")


def test_profiler_records_eager_ops(tmp_path):
    ingot.profiler.start()
    x = ingot.tensor(np.ones((8, 8), np.float32))
    for _ in range(3):
        x = x @ x
    trace = ingot.profiler.stop()
    assert "MatMul" in trace.summary_table()
    path = tmp_path / "trace.json"
    trace.write_chrome_json(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    assert sum(1 for e in events if "MatMul" in e.get("name", "")) >= 3


def test_int8_quantize_and_convert(model_cache, tmp_path):
    """ingot.quantize (a QDQ model) and ingot.convert(precision="int8") on BlazeFace with calibration
    photos: the reports, and the int8 package's scores against the float32 model's on the astronaut."""
    path = find_file(model_cache, "face_detection_front_128x128_barracuda.onnx")
    if path is None:
        pytest.skip("BlazeFace not in the model cache")
    calib = str(tmp_path / "calib")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "quant", "make_calibration.py"), calib], check=True,
                   capture_output=True)
    folder = os.path.join(calib, "blazeface128")
    report = ingot.quantize(path, str(tmp_path / "bf.qdq.onnx"), [folder])
    assert report["quantized"] == 37 and report["samples"] == 30
    assert all(o["cosine"] > 0.95 for o in report["outputs"])
    assert any("corrected the biases of 37 products" in n for n in report["notes"])
    plain = ingot.quantize(path, str(tmp_path / "bf.plain.onnx"), [folder], equalize=False, bias_correction=False)
    assert not any("corrected the biases" in n or "equalized" in n for n in plain["notes"])
    r = ingot.convert(path, str(tmp_path / "bf.int8.ingot"), precision="int8", calib=[folder])
    assert r["precision"] == "int8" and r["quantization"]["quantized"] == 37
    x = np.load(os.path.join(folder, "000.npy"))
    scores = ingot.Session(r["path"]).run({"input:0": x})["Identity:0"].numpy()
    want = ingot.Session(path).run({"input:0": x})["Identity:0"].numpy()
    assert np.corrcoef(scores.ravel(), want.ravel())[0, 1] > 0.99
    dynamic = ingot.quantize(path, str(tmp_path / "bf.dyn.onnx"), dynamic=True)  # convolutions only: none taken
    assert dynamic["quantized"] == 0 and len(dynamic["kept_float"]) == 37
    with pytest.raises(ingot.Error, match="holds no .npy files"):
        os.makedirs(tmp_path / "empty")
        ingot.quantize(path, str(tmp_path / "x.onnx"), [str(tmp_path / "empty")])
    with pytest.raises(ingot.Error, match="calibration is for"):
        ingot.convert(path, str(tmp_path / "y.ingot"), calib=[folder])
