"""ingot.load_extension: build, reload, rebuild on change, compile errors, an insecure cache, a stale
lock; the extension's ops eagerly and under autograd against PyTorch, in an ONNX model of their domain
and in a package that embeds the library (tests/extension/softshrink.cpp, CPU kernels)."""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import ingot

from conftest import ROOT

SOURCE = os.path.join(ROOT, "tests", "extension", "softshrink.cpp")
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    d = tmp_path_factory.mktemp("ext_cache")
    os.chmod(d, 0o700)
    return str(d)


@pytest.fixture(scope="module")
def ext(cache):
    return ingot.load_extension("softshrink_py", [SOURCE], build_directory=cache)


def run_python(code, timeout=300):
    """Runs `code` in a fresh interpreter that imports the same ingot; returns its last stdout line as JSON."""
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_ops_run_eagerly_against_pytorch(ext):
    assert ext.ops == ["test.ext::Softshrink", "test.ext::SoftshrinkGrad", "test.ext::SoftshrinkGradGrad",
                       "test.ext::RepeatRows"]
    x = np.random.default_rng(1).standard_normal((6, 17))
    for lambd in (0.0, 0.3, 1.1):
        lambd = float(np.float32(lambd))  # attributes are float32 (ONNX's)
        got = ext.Softshrink(x, lambd=lambd).numpy()
        want = torch.nn.functional.softshrink(torch.from_numpy(x), lambd).numpy()
        np.testing.assert_array_equal(got, want)
    # ingot.op with the domain is the same op.
    np.testing.assert_array_equal(ingot.op("Softshrink", x, domain="test.ext").numpy(),
                                  torch.nn.functional.softshrink(torch.from_numpy(x), 0.5).numpy())
    with pytest.raises(AttributeError, match="has no op 'Nope'"):
        ext.Nope


def test_autograd_matches_pytorch_first_and_second_order(ext):
    rng = np.random.default_rng(2)
    x_np, w_np = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    x = ingot.tensor(x_np.copy(), requires_grad=True)
    w = ingot.tensor(w_np.copy(), requires_grad=True)
    lambd = float(np.float32(0.4))  # attributes are float32 (ONNX's)
    loss = ingot.op("ReduceSum", ext.Softshrink(x, lambd=lambd) * w, keepdims=0)
    (gx,) = ingot.grad([loss], [x], create_graph=True)
    (gw,) = ingot.grad([ingot.op("ReduceSum", gx * gx, keepdims=0)], [w])

    xt, wt = torch.tensor(x_np, requires_grad=True), torch.tensor(w_np, requires_grad=True)
    losst = (torch.nn.functional.softshrink(xt, lambd) * wt).sum()
    (gxt,) = torch.autograd.grad(losst, xt, create_graph=True)
    (gwt,) = torch.autograd.grad((gxt * gxt).sum(), wt)
    np.testing.assert_allclose(loss.item(), losst.item(), rtol=1e-14)
    np.testing.assert_allclose(gx.numpy(), gxt.detach().numpy(), rtol=1e-14)
    np.testing.assert_allclose(gw.numpy(), gwt.numpy(), rtol=1e-14)


def test_an_unchanged_extension_reloads_in_a_new_process_without_compiling(ext, cache):
    r = run_python(f"""
        import ingot, json
        e = ingot.load_extension("softshrink_py", [{SOURCE!r}], build_directory={cache!r})
        print(json.dumps([e.compiled, e.digest, e.seconds]))""")
    assert r[0] is False and r[1] == ext.digest


def test_a_changed_source_is_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    src = tmp_path / "softshrink.cpp"
    shutil.copy(SOURCE, src)
    code = f"""
        import ingot, json, numpy as np
        e = ingot.load_extension("changing", [{str(src)!r}], build_directory={str(cache)!r})
        print(json.dumps([e.compiled, e.Softshrink(np.array([2.0])).numpy().tolist()]))"""
    assert run_python(code) == [True, [1.5]]
    assert run_python(code) == [False, [1.5]]
    src.write_text(src.read_text().replace('.attr("lambd", 0.5f)', '.attr("lambd", 0.25f)', 1))
    assert run_python(code) == [True, [1.75]]
    assert run_python(code) == [False, [1.75]]


def test_another_build_of_a_loaded_extension_is_refused_in_the_same_process(ext, tmp_path):
    src = tmp_path / "softshrink.cpp"
    src.write_text(open(SOURCE).read().replace('.attr("lambd", 0.5f)', '.attr("lambd", 0.75f)', 1))
    with pytest.raises(ingot.Error, match=r"op test.ext::Softshrink is already defined by extension 'softshrink_py'"):
        ingot.load_extension("softshrink_py", [str(src)], build_directory=str(tmp_path / "cache"))


def test_a_compile_error_is_the_compilers_message_with_file_and_line(tmp_path):
    src = tmp_path / "broken.cpp"
    src.write_text("#include <ingot/extension.h>\n\nstatic int f() { return not_declared_here; }\n")
    with pytest.raises(ingot.Error) as e:
        ingot.load_extension("broken", [str(src)], build_directory=str(tmp_path / "cache"))
    assert "extension 'broken': compiling broken.cpp failed" in str(e.value)
    assert f"{src}:3:" in str(e.value) and "not_declared_here" in str(e.value)


def test_an_insecure_cache_is_refused(tmp_path):
    cache = tmp_path / "shared"
    cache.mkdir()
    os.chmod(cache, 0o777)
    with pytest.raises(ingot.Error, match=r"refusing the extension cache .*writable by everyone \(mode 0777\)"):
        ingot.load_extension("softshrink_open", [SOURCE], build_directory=str(cache))


def _hold_lock(lock_path, seconds):
    """A process that holds the build lock like a build in progress (flock), for `seconds`."""
    code = f"""
        import fcntl, sys, time
        f = open({str(lock_path)!r}, "a+")
        fcntl.flock(f, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep({seconds})"""
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


def test_a_killed_build_leaves_no_stale_lock(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    holder = _hold_lock(cache / "softshrink_killed.lock", 600)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    e = run_python(f"""
        import ingot, json
        e = ingot.load_extension("softshrink_killed", [{SOURCE!r}], build_directory={str(cache)!r})
        print(json.dumps(e.ops))""", timeout=120)
    assert "test.ext::Softshrink" in e


def test_a_build_in_progress_is_waited_for(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    holder = _hold_lock(cache / "softshrink_wait.lock", 2)
    start = time.monotonic()
    r = run_python(f"""
        import ingot, json
        e = ingot.load_extension("softshrink_wait", [{SOURCE!r}], build_directory={str(cache)!r})
        print(json.dumps(e.compiled))""", timeout=120)
    holder.wait()
    assert r is True and time.monotonic() - start >= 1.5


def _model_with_extension_ops(path):
    onnx = pytest.importorskip("onnx")
    from onnx import helper, TensorProto
    nodes = [helper.make_node("RepeatRows", ["x"], ["r"], domain="test.ext", repeats=2),
             helper.make_node("Softshrink", ["r"], ["s"], domain="test.ext", lambd=0.2),
             helper.make_node("Tanh", ["s"], ["y"])]
    graph = helper.make_graph(nodes, "ext", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("test.ext", 1)])
    model.ir_version = 8
    onnx.save(model, path)


def test_onnx_models_and_packages_of_its_domain(ext, tmp_path):
    model = str(tmp_path / "ext.onnx")
    _model_with_extension_ops(model)
    x = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    want = np.tanh(torch.nn.functional.softshrink(torch.from_numpy(np.repeat(x, 2, axis=0)), float(np.float32(0.2))).numpy())
    s = ingot.Session(model)
    assert s.outputs[0][1] == "float32"  # inferred through the extension's shape rule (y has no type)
    np.testing.assert_allclose(s.run({"x": x})["y"].numpy(), want, rtol=1e-6)

    cli = os.environ.get("INGOT_CLI")
    if not cli:
        pytest.skip("INGOT_CLI not set (ctest sets it)")
    package = str(tmp_path / "ext.ingot")
    subprocess.run([cli, "--extension", ext.library, "convert", model, "-o", package, "-q"], check=True)
    shown = subprocess.run([cli, "inspect", package], check=True, capture_output=True, text=True).stdout
    assert f"extension: softshrink_py (build {ext.digest}" in shown
    # A new process that never loads the extension: the package's embedded copy is used.
    r = run_python(f"""
        import ingot, json, numpy as np
        s = ingot.Session({package!r})
        y = s.run({{"x": np.array({x.tolist()!r}, dtype=np.float32)}})["y"].numpy()
        print(json.dumps([y.tolist(), [e.name for e in ingot.loaded_extensions()]]))""")
    np.testing.assert_allclose(np.array(r[0]), want, rtol=1e-6)
    assert r[1] == ["softshrink_py"]
    # Without the extension, the ONNX model names what is missing.
    np.save(tmp_path / "x.npy", x)
    out = subprocess.run([cli, "run", model, "--input", f"x={tmp_path / 'x.npy'}"], capture_output=True, text=True)
    assert out.returncode == 1 and "RepeatRows" in out.stderr


def test_compiled_and_vmapped_functions_run_the_extension_ops(ext):
    # Traced into a graph (the forward op and its gradient op as nodes), compiled, and batched by vmap
    # (per element: the extension declares no batching rule), all against PyTorch.
    x = np.random.default_rng(6).standard_normal((3, 5))
    lambd = float(np.float32(0.3))

    def loss(v):
        y = ext.Softshrink(v, lambd=lambd)
        return ingot.op("ReduceSum", y * y, keepdims=0)

    g = ingot.compile(ingot.func.grad(loss))
    xt = torch.tensor(x, requires_grad=True)
    (want,) = torch.autograd.grad((torch.nn.functional.softshrink(xt, lambd) ** 2).sum(), xt)
    np.testing.assert_allclose(g(x).numpy(), want.numpy(), rtol=1e-14)
    assert "SoftshrinkGrad" in g.graph(x)
    per_row = ingot.vmap(lambda v: ext.Softshrink(v, lambd=lambd))(x).numpy()
    np.testing.assert_array_equal(per_row, torch.nn.functional.softshrink(torch.from_numpy(x), lambd).numpy())
