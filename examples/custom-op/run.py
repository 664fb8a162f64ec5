"""The custom-op story in four steps (docs/CUSTOM_OPS.md), with Ingot's Python module.

A 7-layer Sequential-style MLP (Linear, ReLU, Linear, Softshrink, Linear, ReLU, Linear) as an ONNX
model. On the GPU its Softshrink (ONNX's Shrink) has no kernel here (hidden with
INGOT_HIDE_CUDA_KERNELS=Shrink, as the tests do), so the profile shows a CPU fallback and the copies
around it. Then:
  1. the kernel source: softshrink.cu (CUDA) and softshrink.cpp (CPU);
  2. the bindings: the INGOT_EXTENSION block in softshrink.cpp (op name, domain, inputs, attribute,
     gradient op);
  3. the just-in-time build: ingot.load_extension (cached: a second run does not compile);
  4. use: the model's Shrink nodes become example.custom::Softshrink; the profile has no fallback and
     no copy; the op also runs eagerly under autograd, and inside a package that embeds it.

    python3 run.py [--device cpu|cuda] [--out DIR] [--ingot path/to/ingot-cli]
Writes DIR/{before,after}.{json,html} (Chrome traces and HTML timelines) and DIR/summary.json.
"""
import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("INGOT_HIDE_CUDA_KERNELS", "Shrink")  # the "missing GPU kernel" of the story

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper, numpy_helper, TensorProto  # noqa: E402

import ingot  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LAMBD = 0.5


def make_model(path, width, classes, rng):
    """x[N, width] -> Gemm, Relu, Gemm, Shrink (softshrink), Gemm, Relu, Gemm -> y[N, classes]."""
    layers = [("fc1", width, width), ("fc2", width, width), ("fc3", width, width), ("fc4", classes, width)]
    inits, nodes = [], []
    x = "x"
    for name, out_f, in_f in layers:
        bound = 1.0 / np.sqrt(in_f)  # torch.nn.Linear's initialization
        inits.append(numpy_helper.from_array(rng.uniform(-bound, bound, (out_f, in_f)).astype(np.float32), name + ".weight"))
        inits.append(numpy_helper.from_array(rng.uniform(-bound, bound, out_f).astype(np.float32), name + ".bias"))
        nodes.append(helper.make_node("Gemm", [x, name + ".weight", name + ".bias"], [name], name=name, transB=1))
        x = name
        if name in ("fc1", "fc3"):
            nodes.append(helper.make_node("Relu", [x], [name + ".relu"], name=name + ".relu"))
            x = name + ".relu"
        elif name == "fc2":
            nodes.append(helper.make_node("Shrink", [x], ["softshrink"], name="softshrink", bias=LAMBD, lambd=LAMBD))
            x = "softshrink"
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "mlp7", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", classes])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="ingot-example")
    model.ir_version = 8
    onnx.save(model, path)


def with_custom_op(src, dst):
    """Step 4: the model's Shrink nodes as example.custom::Softshrink."""
    model = onnx.load(src)
    for n in model.graph.node:
        if n.op_type == "Shrink":
            n.op_type, n.domain = "Softshrink", "example.custom"
            del n.attribute[:]
            n.attribute.append(helper.make_attribute("lambd", LAMBD))
    model.opset_import.append(helper.make_opsetid("example.custom", 1))
    onnx.save(model, dst)


def measure(session, x, runs, out_prefix, device):
    """Median step time over `runs`, then one profiled run: its trace and HTML, fallbacks, copies."""
    feeds = {"x": x}
    for _ in range(5):
        session.run(feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        out = session.run(feeds)["y"]
        if device == "cuda":
            ingot.synchronize("cuda")
        times.append((time.perf_counter() - t) * 1e3)
    stats = session.last_run_stats()
    ingot.profiler.start()
    session.run(feeds)
    if device == "cuda":
        ingot.synchronize("cuda")
    trace = ingot.profiler.stop()
    trace.write_chrome_json(out_prefix + ".json")
    trace.write_html(out_prefix + ".html", title=os.path.basename(out_prefix))
    return {
        "step_ms_median": float(np.median(times)),
        "step_ms_p10": float(np.percentile(times, 10)),
        "fallback_nodes": [f[0] for f in session.fallbacks()],
        "fallback_ops_per_run": stats["fallback_ops"],
        "fallback_copy_bytes_per_run": stats["fallback_copy_bytes"],
        "copies_per_run": stats["copies"],
        "graph_replay": stats["graph_replay"],
        "summary": trace.summary_table(top=8),
    }, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--ingot", default=None, help="the ingot CLI, to convert the model into a package")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(0)
    model = os.path.join(args.out, "mlp7.onnx")
    make_model(model, args.width, 10, rng)
    x_host = rng.standard_normal((args.batch, args.width)).astype(np.float32)
    x = ingot.tensor(x_host, device=args.device)
    opts = dict(device=args.device, outputs_on_device=True)
    summary = {"device": args.device, "batch": args.batch, "width": args.width}

    print("== before: the model's Softshrink (ONNX Shrink)" +
          (" has no CUDA kernel here (INGOT_HIDE_CUDA_KERNELS)" if args.device == "cuda" else
           " runs on the CPU's own Shrink kernel (nothing falls back on the CPU)"))
    before, y_before = measure(ingot.Session(model, **opts), x, args.runs, os.path.join(args.out, "before"), args.device)
    print(before["summary"])
    print(f"fallback nodes {before['fallback_nodes']}, {before['fallback_ops_per_run']} fallback ops and "
          f"{before['fallback_copy_bytes_per_run']} bytes copied for them per run; step {before['step_ms_median']:.3f} ms")

    print("== steps 1-3: kernel source, bindings, just-in-time build")
    sources = [os.path.join(HERE, "softshrink.cpp")]
    cflags = []
    if args.device == "cuda":
        sources.append(os.path.join(HERE, "softshrink.cu"))
        cflags.append("-DWITH_CUDA")
    ext = ingot.load_extension("softshrink", sources, extra_cflags=cflags, verbose=True)
    print(f"{ext!r}: {'compiled' if ext.compiled else 'from the cache'} in {ext.seconds:.3f} s")
    summary["extension"] = {"ops": ext.ops, "compiled": ext.compiled, "load_seconds": ext.seconds, "digest": ext.digest}

    print("== step 4: the model with example.custom::Softshrink")
    custom = os.path.join(args.out, "mlp7_custom.onnx")
    with_custom_op(model, custom)
    after, y_after = measure(ingot.Session(custom, **opts), x, args.runs, os.path.join(args.out, "after"), args.device)
    print(after["summary"])
    print(f"fallback nodes {after['fallback_nodes']}, {after['fallback_ops_per_run']} fallback ops and "
          f"{after['fallback_copy_bytes_per_run']} bytes copied for them per run; step {after['step_ms_median']:.3f} ms")
    a, b = np.asarray(y_before), np.asarray(y_after)
    summary["max_abs_diff_before_after"] = float(np.abs(a - b).max())
    assert np.allclose(a, b, rtol=1e-5, atol=1e-5), "the custom op changed the model's outputs"

    # Eagerly, under autograd: the gradient op of the extension against the formula.
    t = ingot.tensor(x_host[:4, :16].astype(np.float32), device=args.device, requires_grad=True)
    y = ext.Softshrink(t, lambd=LAMBD)
    ingot.op("ReduceSum", y * y, keepdims=0).backward()
    g = np.asarray(t.grad)
    xs = x_host[:4, :16]
    want = np.where(np.abs(xs) > LAMBD, 2 * (xs - np.sign(xs) * LAMBD), 0)
    summary["eager_grad_max_abs_err"] = float(np.abs(g - want).max())
    assert summary["eager_grad_max_abs_err"] < 1e-5

    if args.ingot:  # a package that embeds the extension, run in this process and by the CLI
        package = os.path.join(args.out, "mlp7_custom.ingot")
        subprocess.run([args.ingot, "--extension", ext.library, "convert", custom, "-o", package, "--device",
                        args.device, "-q"], check=True)
        s = ingot.Session(package, device=args.device, outputs_on_device=True)
        pkg_out = np.asarray(s.run({"x": x})["y"])
        summary["package_max_abs_diff"] = float(np.abs(pkg_out - b).max())
        summary["package_fallbacks"] = len(s.fallbacks())
        # A process that never saw the sources or the build: the CLI runs the package from its
        # embedded copy of the extension (on a GPU, the kernels' cubin inside it).
        np.save(os.path.join(args.out, "x.npy"), x_host)
        run = subprocess.run([args.ingot, "run", package, "--device", args.device, "-i",
                              "x=" + os.path.join(args.out, "x.npy"), "-o", os.path.join(args.out, "cli")],
                             capture_output=True, text=True, check=True)
        cli_out = np.load(os.path.join(args.out, "cli", "output_0.npy"))
        summary["package_cli_max_abs_diff"] = float(np.abs(cli_out - b).max())
        summary["package_cli_fallback_reported"] = "instead of" in run.stderr
        print(f"package run by the CLI (a fresh process, no sources): max abs diff {summary['package_cli_max_abs_diff']}, "
              f"fallbacks reported: {summary['package_cli_fallback_reported']}")
        assert summary["package_cli_max_abs_diff"] <= 1e-5 and not summary["package_cli_fallback_reported"]

    summary["before"] = {k: v for k, v in before.items() if k != "summary"}
    summary["after"] = {k: v for k, v in after.items() if k != "summary"}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(f"== {args.device}: step {before['step_ms_median']:.3f} ms -> {after['step_ms_median']:.3f} ms; "
          f"fallbacks {len(before['fallback_nodes'])} -> {len(after['fallback_nodes'])}, fallback copy bytes per run "
          f"{before['fallback_copy_bytes_per_run']} -> {after['fallback_copy_bytes_per_run']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
