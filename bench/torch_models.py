#!/usr/bin/python3
"""PyTorch side of the issue-5 comparison: three architectures exported to ONNX for Ingot, and their
steady-state latency in PyTorch eager, torch.compile and torch.compile(mode="reduce-overhead").

Models (random weights, fixed seed, eval mode):
  resnet50              torchvision.models.resnet50(weights=None)            input [N,3,224,224]
  mobilenet_v3_large    torchvision.models.mobilenet_v3_large(weights=None)  input [N,3,224,224]
  whisper_tiny_encoder  Whisper-tiny's encoder (d_model 384, 4 layers, 6 heads, ffn 1536, 80 mel bins,
                        1500 positions): transformers' WhisperEncoder when transformers imports, else
                        a plain-torch module of the same structure and parameter names
                                                                            input [N,80,3000] -> [N,1500,384]

Random weights leave batch-norm statistics at mean 0 / variance 1, so activations grow (ResNet-50) or
vanish (MobileNetV3: outputs ~1e-10, below float16's range) layer by layer. `export` therefore
recalibrates every BatchNorm's running statistics on a few random batches (deterministic), which
keeps activations O(1) like a trained network's; the weights are saved as DIR/<model>.pt and `bench`
loads them, so PyTorch and the ONNX files compute the same function.

Usage:
  /usr/bin/python3 bench/torch_models.py export --out DIR [--opset 17]
      DIR/<model>.onnx              opset 17, dynamic first axis "batch", input "input", output "output"
      DIR/<model>.pt                the weights (state_dict) bench uses
      DIR/<model>.b{1,32}.input.npy deterministic float32 inputs
      DIR/<model>.b1.output.npy     torch's float32 CPU output for batch 1 (the correctness reference)
      DIR/models.json               the models in tests/models/models.json's format, with the batch-1
                                    package's convert arguments (for bench/cold_start.py --spec)
  python3 bench/torch_models.py bench --models DIR --batch 1 32 --precision fp32 fp16 --json FILE
      [--variants eager reduce-overhead compile] [--warmup 10] [--iterations 50]
      [--compile-budget-s S] [--device cuda|cpu] [--only MODEL ...] [--attn sdpa|eager]
  python3 bench/torch_models.py kernels --models DIR --case MODEL:BATCH:PRECISION [--runs 5]
      [--top 40] [--device cuda|cpu]
      where eager torch's time goes, per kernel (torch.profiler over --runs calls after warm-up; same
      settings as bench), to set beside `ingot profile --trace` of Ingot's package

bench, per model x batch x precision: eager, torch.compile(model, dynamic=False) and
torch.compile(model, mode="reduce-overhead", dynamic=False), each on a fresh dynamo cache; fp16 is
model.half() with float16 inputs (Ingot's --precision fp16 keeps float32 inputs/outputs instead).
TF32 off, cudnn.benchmark on, torch.inference_mode. first_call_s is the first call's wall time
(for the compiled variants: compilation). Steady state: `--warmup` untimed calls, then
`--iterations` calls, each timed with perf_counter around the call and torch.cuda.synchronize()
(like `ingot bench`, which times Session::run end to end); median and p90. One more record per
model x batch, variant "host_io": a pageable float32 host->device copy of the input plus the
device->host copy of the output, which `ingot bench` pays in each run and torch does not.
A variant that fails records its error and the run continues; once the compiled variants have
spent --compile-budget-s seconds, the remaining compiled variants are skipped (recorded as such).
Order: batch sizes, then precisions, then models, then --variants as given, so a spent budget cuts
the same cases of every model.
--device cpu with tiny --iterations is a debug mode that runs every code path without a GPU.

Writes FILE as a JSON list of records {model, batch, precision, variant, median_ms, p90_ms,
first_call_s, ...} (error set when the variant failed or was skipped).
"""
import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch

MODELS = ("resnet50", "mobilenet_v3_large", "whisper_tiny_encoder")
SEED = 20261129
WHISPER_TINY = dict(d_model=384, encoder_layers=4, encoder_attention_heads=6, encoder_ffn_dim=1536,
                    num_mel_bins=80, max_source_positions=1500)


def input_shape(name, batch):
    return [batch, 80, 3000] if name.startswith("whisper") else [batch, 3, 224, 224]


# ---------------------------------------------------------------------------------------------------
# Whisper-tiny encoder


def sinusoids(length, channels, max_timescale=10000):
    """Whisper's positional table [length, channels]: sin on the first half, cos on the second."""
    increment = math.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = torch.exp(-increment * torch.arange(channels // 2, dtype=torch.float32))
    scaled = torch.arange(length, dtype=torch.float32)[:, None] * inv_timescales[None, :]
    return torch.cat([scaled.sin(), scaled.cos()], dim=1)


class PlainAttention(torch.nn.Module):
    """Whisper's self-attention: k_proj has no bias, queries are scaled by head_dim**-0.5."""

    def __init__(self, d_model, heads, sdpa):
        super().__init__()
        self.heads, self.head_dim, self.sdpa = heads, d_model // heads, sdpa
        self.q_proj = torch.nn.Linear(d_model, d_model)
        self.k_proj = torch.nn.Linear(d_model, d_model, bias=False)
        self.v_proj = torch.nn.Linear(d_model, d_model)
        self.out_proj = torch.nn.Linear(d_model, d_model)

    def forward(self, x):
        b, t, c = x.shape

        def split(y):  # [B,T,C] -> [B,H,T,D]
            return y.reshape(b, t, self.heads, self.head_dim).transpose(1, 2)

        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        if self.sdpa:
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        else:
            w = torch.matmul(q * self.head_dim ** -0.5, k.transpose(-1, -2)).softmax(dim=-1)
            o = torch.matmul(w, v)
        return self.out_proj(o.transpose(1, 2).reshape(b, t, c))


class PlainEncoderLayer(torch.nn.Module):
    def __init__(self, d_model, heads, ffn, sdpa):
        super().__init__()
        self.self_attn_layer_norm = torch.nn.LayerNorm(d_model)
        self.self_attn = PlainAttention(d_model, heads, sdpa)
        self.final_layer_norm = torch.nn.LayerNorm(d_model)
        self.fc1 = torch.nn.Linear(d_model, ffn)
        self.fc2 = torch.nn.Linear(ffn, d_model)

    def forward(self, x):
        x = x + self.self_attn(self.self_attn_layer_norm(x))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.final_layer_norm(x))))


class PlainWhisperEncoder(torch.nn.Module):
    """transformers' WhisperEncoder rebuilt in plain torch, with the same parameter names (so the two
    load each other's state_dict) and the same initialization (normal(0, 0.02), sinusoidal positions)."""

    def __init__(self, d_model, encoder_layers, encoder_attention_heads, encoder_ffn_dim, num_mel_bins,
                 max_source_positions, sdpa=False):
        super().__init__()
        self.conv1 = torch.nn.Conv1d(num_mel_bins, d_model, kernel_size=3, padding=1)
        self.conv2 = torch.nn.Conv1d(d_model, d_model, kernel_size=3, stride=2, padding=1)
        self.embed_positions = torch.nn.Embedding(max_source_positions, d_model)
        self.layers = torch.nn.ModuleList(
            PlainEncoderLayer(d_model, encoder_attention_heads, encoder_ffn_dim, sdpa) for _ in range(encoder_layers))
        self.layer_norm = torch.nn.LayerNorm(d_model)
        for m in self.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Conv1d)):
                torch.nn.init.normal_(m.weight, std=0.02)
                if m.bias is not None:
                    torch.nn.init.zeros_(m.bias)
        with torch.no_grad():
            self.embed_positions.weight.copy_(sinusoids(max_source_positions, d_model))
        self.embed_positions.requires_grad_(False)

    def forward(self, input_features):
        x = torch.nn.functional.gelu(self.conv1(input_features))
        x = torch.nn.functional.gelu(self.conv2(x)).permute(0, 2, 1)
        x = x + self.embed_positions.weight
        for layer in self.layers:
            x = layer(x)
        return self.layer_norm(x)


class WhisperEncoderOnly(torch.nn.Module):
    """Input features [B,80,3000] -> last hidden state [B,1500,384], whichever encoder is inside."""

    def __init__(self, encoder, hf):
        super().__init__()
        self.encoder, self.hf = encoder, hf

    def forward(self, input_features):
        out = self.encoder(input_features)
        if not self.hf:
            return out
        return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]


def whisper_encoder(impl, attn):
    """impl: 'transformers', 'plain' or 'auto' (transformers when it imports). attn: 'eager' (explicit
    MatMul/Softmax, what the ONNX export uses) or 'sdpa' (scaled_dot_product_attention, torch's default)."""
    if impl in ("auto", "transformers"):
        try:
            from transformers import WhisperConfig
            from transformers.models.whisper.modeling_whisper import WhisperEncoder
        except ImportError:
            if impl == "transformers":
                raise
        else:
            config = WhisperConfig(**WHISPER_TINY, encoder_layerdrop=0.0, dropout=0.0, attention_dropout=0.0,
                                   activation_dropout=0.0)
            config._attn_implementation = attn
            return WhisperEncoderOnly(WhisperEncoder(config), hf=True), "transformers"
    sdpa = attn == "sdpa" and hasattr(torch.nn.functional, "scaled_dot_product_attention")
    return WhisperEncoderOnly(PlainWhisperEncoder(**WHISPER_TINY, sdpa=sdpa), hf=False), "plain"


# ---------------------------------------------------------------------------------------------------
# Building, BN recalibration, export


def build(name, whisper_impl="auto", attn="eager"):
    """The architecture with fixed-seed random weights, in eval mode, on the CPU. Returns (model, impl)."""
    torch.manual_seed(SEED)
    if name in ("resnet50", "mobilenet_v3_large"):
        import torchvision  # here: the Whisper encoder needs only torch

        return getattr(torchvision.models, name)(weights=None).eval(), "torchvision"
    if name == "whisper_tiny_encoder":
        model, impl = whisper_encoder(whisper_impl, attn)
        return model.eval(), impl
    raise ValueError(f"unknown model {name}")


def recalibrate_batchnorm(model, shape, batches=4, batch=16):
    """Running statistics as the cumulative average over a few random batches (train-mode forward,
    no gradient); weights are untouched. Deterministic (own generator)."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    gen = torch.Generator().manual_seed(SEED + 1)
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn([batch] + shape[1:], generator=gen))
    for bn in bns:
        bn.momentum = 0.1
    model.eval()


def make_input(name, batch):
    rng = np.random.default_rng(SEED + batch + 1000 * MODELS.index(name))
    shape = input_shape(name, batch)
    if name.startswith("whisper"):  # log-mel features are roughly in [-1, 1.5] after Whisper's scaling
        return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    return rng.standard_normal(size=shape).astype(np.float32)  # a normalized image


def onnx_export(model, example, path, opset):
    kwargs = dict(input_names=["input"], output_names=["output"], opset_version=opset, do_constant_folding=True,
                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2] if p.isdigit())
    if version < (2, 5):
        torch.onnx.export(model, (example,), path, **kwargs)
        return
    try:  # the TorchScript exporter: the opset asked for, no onnxscript needed
        torch.onnx.export(model, (example,), path, dynamo=False, **kwargs)
    except Exception as e:  # noqa: BLE001 -- a torch without it: the torch.export-based exporter (needs onnxscript)
        print(f"TorchScript ONNX export failed ({type(e).__name__}: {e}); trying dynamo=True", file=sys.stderr)
        del kwargs["dynamic_axes"]
        batch = torch.export.Dim("batch")
        example = example.repeat(2, *[1] * (example.dim() - 1))  # batch 1 would be specialized
        torch.onnx.export(model, (example,), path, dynamo=True, dynamic_shapes=({0: batch},), **kwargs)


def cmd_export(args):
    os.makedirs(args.out, exist_ok=True)
    spec = {"comment": "Written by bench/torch_models.py export (tests/models/models.json's format).", "models": []}
    for name in args.only or MODELS:
        start = time.perf_counter()
        model, impl = build(name, args.whisper_impl, attn="eager")
        recalibrate_batchnorm(model, input_shape(name, 16))
        torch.save(model.state_dict(), os.path.join(args.out, f"{name}.pt"))
        inputs = {b: make_input(name, b) for b in args.batches}
        for b, x in inputs.items():
            np.save(os.path.join(args.out, f"{name}.b{b}.input.npy"), x)
        with torch.inference_mode():
            ref = model(torch.from_numpy(inputs[1])).numpy()
        np.save(os.path.join(args.out, f"{name}.b1.output.npy"), ref)
        path = os.path.join(args.out, f"{name}.onnx")
        with torch.no_grad():
            onnx_export(model, torch.from_numpy(inputs[1]), path, args.opset)
        params = sum(p.numel() for p in model.parameters())
        spec["models"].append({"name": name, "file": f"{name}.onnx", "inputs": {"input": f"{name}.b1.input.npy"},
                               "convert_args": ["--input-shape", "input=" + ",".join(map(str, input_shape(name, 1)))],
                               "impl": impl, "params": params, "opset": args.opset,
                               "batches": {str(b): list(inputs[b].shape) for b in inputs}})
        print(f"{name}: {impl}, {params / 1e6:.2f} M parameters, output {list(ref.shape)} "
              f"(|max| {np.abs(ref).max():.3g}, std {ref.std():.3g}), {os.path.getsize(path) / 1e6:.1f} MB ONNX, "
              f"{time.perf_counter() - start:.1f} s", flush=True)
    with open(os.path.join(args.out, "models.json"), "w") as f:
        json.dump(spec, f, indent=1)


# ---------------------------------------------------------------------------------------------------
# Benchmark


def dynamo_reset():
    import torch._dynamo as dynamo

    dynamo.reset()


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def time_calls(fn, x, device, warmup, iterations):
    with torch.inference_mode():
        for _ in range(warmup):
            fn(x)
        sync(device)
        samples = []
        for _ in range(iterations):
            start = time.perf_counter()
            fn(x)
            sync(device)
            samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return percentile(samples, 0.5), percentile(samples, 0.9), samples[0]


def percentile(sorted_samples, p):
    """Linear interpolation between the nearest ranks, as `ingot bench` computes it."""
    pos = p * (len(sorted_samples) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_samples[lo] + (sorted_samples[hi] - sorted_samples[lo]) * (pos - lo)


def host_io_ms(x_host, out_shape, device, iterations):
    """Pageable float32 copies of one input up and one output down (what `ingot bench` pays per run)."""
    y = torch.empty(out_shape, dtype=torch.float32, device=device)
    samples = []
    for _ in range(max(3, iterations)):
        start = time.perf_counter()
        x_host.to(device)
        y.cpu()
        sync(device)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def cmd_bench(args):
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_models.py bench: CUDA is not available (use --device cpu to debug)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    has_compile = hasattr(torch, "compile")
    meta = {"torch": torch.__version__, "python": platform.python_version(),
            "gpu": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
            "warmup": args.warmup, "iterations": args.iterations}
    print(f"torch {meta['torch']} on {meta['gpu']}; TF32 off, cudnn.benchmark on; fp16 = model.half() with "
          f"float16 inputs; {args.warmup} warm-up + {args.iterations} timed calls, each synchronized", flush=True)
    spec = {m["name"]: m for m in json.load(open(os.path.join(args.models, "models.json")))["models"]}
    records, compile_spent = [], 0.0

    def emit(rec):
        records.append(rec)
        with open(args.json, "w") as f:  # rewritten after every record: a timeout keeps what was measured
            json.dump(records, f, indent=1)
        ms = f"median {rec['median_ms']:.3f} ms" if rec.get("median_ms") is not None else ""
        ms += f"  p90 {rec['p90_ms']:.3f} ms" if rec.get("p90_ms") is not None else ""
        first = f"  first call {rec['first_call_s']:.2f} s" if rec.get("first_call_s") is not None else ""
        err = f"  ERROR {rec['error']}" if rec.get("error") else ""
        print(f"{rec['model']:<22} b{rec['batch']:<3} {rec['precision']:<5} {rec['variant']:<16} {ms}{first}{err}",
              flush=True)

    # Batch and precision outside, models inside: a spent compile budget cuts the same cases of every model.
    names = [n for n in (args.only or MODELS) if n in spec]
    for n in set(args.only or MODELS) - set(names):
        print(f"skip {n}: not in {args.models}/models.json", file=sys.stderr)
    weights = {n: torch.load(os.path.join(args.models, f"{n}.pt"), map_location="cpu") for n in names}
    io_done = set()
    for batch in args.batch:
        for precision in args.precision:
            dtype = torch.float16 if precision == "fp16" else torch.float32
            for name in names:
                if args.cases and f"{name}:{batch}:{precision}" not in args.cases:
                    continue
                impl = spec[name].get("impl", "auto")
                model = build(name, impl if name.startswith("whisper") else "auto", attn=args.attn)[0]
                model.load_state_dict(weights[name])
                model = model.eval().to(device=device, dtype=dtype)
                x_host = torch.from_numpy(np.load(os.path.join(args.models, f"{name}.b{batch}.input.npy")))
                x = x_host.to(device=device, dtype=dtype)
                base = dict(model=name, batch=batch, precision=precision, impl=impl, attn=args.attn,
                            input_dtype=str(dtype).replace("torch.", ""), **meta)
                out_shape = None
                for variant in args.variants:
                    rec = dict(base, variant=variant, median_ms=None, p90_ms=None, min_ms=None, first_call_s=None,
                               error=None)
                    compiled = variant != "eager"
                    fn = None
                    try:
                        if compiled and not has_compile:
                            raise RuntimeError(f"torch {torch.__version__} has no torch.compile")
                        if compiled and compile_spent > args.compile_budget_s:
                            raise RuntimeError(f"skipped: compile budget of {args.compile_budget_s:g} s spent")
                        if compiled:
                            dynamo_reset()  # a fresh cache per variant: no recompiles, no dynamic shapes
                            kw = {"mode": "reduce-overhead"} if variant == "reduce-overhead" else {}
                            fn = torch.compile(model, dynamic=False, **kw)
                        else:
                            fn = model
                        sync(device)
                        start = time.perf_counter()
                        try:
                            with torch.inference_mode():
                                y = fn(x)
                            sync(device)
                        finally:
                            rec["first_call_s"] = time.perf_counter() - start
                            if compiled:
                                compile_spent += rec["first_call_s"]
                        out_shape = list(y.shape)
                        del y
                        rec["median_ms"], rec["p90_ms"], rec["min_ms"] = time_calls(fn, x, device, args.warmup,
                                                                                    args.iterations)
                    except Exception as e:  # noqa: BLE001 -- one failing variant must not stop the rest
                        text = str(e).strip()
                        rec["error"] = f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"[:500]
                    fn = None
                    if device == "cuda":
                        torch.cuda.empty_cache()
                    emit(rec)
                del model, x
                if out_shape is not None and "host_io" not in args.skip and (name, batch) not in io_done:
                    io_done.add((name, batch))
                    ms = host_io_ms(x_host, out_shape, device, args.iterations)
                    emit(dict(model=name, batch=batch, precision="fp32", variant="host_io", impl=impl,
                              attn=args.attn, input_dtype="float32", median_ms=ms, p90_ms=None, min_ms=None,
                              first_call_s=None, error=None, **meta))
    if has_compile:
        dynamo_reset()
    print(f"compiled variants' first calls: {compile_spent:.1f} s in all", flush=True)


def cmd_kernels(args):
    """Eager torch's kernels for one case: the per-kernel table of torch.profiler, slowest first."""
    from torch.profiler import ProfilerActivity, profile

    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_models.py kernels: CUDA is not available (use --device cpu to debug)")
    try:
        name, batch, precision = args.case.split(":")
        batch = int(batch)
    except ValueError:
        sys.exit(f"torch_models.py kernels: --case {args.case!r} is not MODEL:BATCH:PRECISION")
    if name not in MODELS or precision not in ("fp32", "fp16"):
        sys.exit(f"torch_models.py kernels: unknown model or precision in --case {args.case!r}")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    spec = {m["name"]: m for m in json.load(open(os.path.join(args.models, "models.json")))["models"]}
    if name not in spec:
        sys.exit(f"torch_models.py kernels: {name} is not in {args.models}/models.json")
    dtype = torch.float16 if precision == "fp16" else torch.float32
    model = build(name, spec[name].get("impl", "auto") if name.startswith("whisper") else "auto", attn=args.attn)[0]
    model.load_state_dict(torch.load(os.path.join(args.models, f"{name}.pt"), map_location="cpu"))
    model = model.eval().to(device=device, dtype=dtype)
    x = torch.from_numpy(np.load(os.path.join(args.models, f"{name}.b{batch}.input.npy"))).to(device=device, dtype=dtype)
    activity = ProfilerActivity.CUDA if device == "cuda" else ProfilerActivity.CPU
    with torch.inference_mode():
        for _ in range(10):
            model(x)
        sync(device)
        with profile(activities=[activity]) as prof:
            for _ in range(args.runs):
                model(x)
            sync(device)
    sort = "cuda_time_total" if device == "cuda" else "self_cpu_time_total"
    print(f"torch {torch.__version__} eager, {name} b{batch} {precision} on {device}: {args.runs} runs after 10 "
          f"warm-up (TF32 off, cudnn.benchmark on; attention {args.attn}); totals are over all runs")
    print(prof.key_averages().table(sort_by=sort, row_limit=args.top, max_name_column_width=110))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export", help="build, export to ONNX, write inputs and the batch-1 reference")
    ex.add_argument("--out", required=True)
    ex.add_argument("--opset", type=int, default=17)
    ex.add_argument("--batches", type=int, nargs="+", default=[1, 32], help="input files to write (batch 1 is always written: the reference output is its)")
    ex.add_argument("--whisper-impl", choices=["auto", "transformers", "plain"], default="auto")
    ex.add_argument("--only", nargs="+", choices=MODELS)
    be = sub.add_parser("bench", help="steady-state latency: eager, torch.compile, reduce-overhead")
    be.add_argument("--models", required=True, help="the export directory")
    be.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    be.add_argument("--precision", nargs="+", choices=["fp32", "fp16"], default=["fp32", "fp16"])
    be.add_argument("--variants", nargs="+", choices=["eager", "compile", "reduce-overhead"],
                    default=["eager", "reduce-overhead", "compile"], help="run in this order")
    be.add_argument("--warmup", type=int, default=10)
    be.add_argument("--iterations", type=int, default=50)
    be.add_argument("--compile-budget-s", type=float, default=float("inf"),
                    help="skip further compiled variants once their first calls took this long in all")
    be.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: a debug run of the code paths")
    be.add_argument("--attn", choices=["sdpa", "eager"], default="sdpa",
                    help="Whisper attention in torch (the ONNX export always uses explicit MatMul/Softmax)")
    be.add_argument("--only", nargs="+", choices=MODELS)
    be.add_argument("--skip", nargs="*", default=[], choices=["host_io"])
    be.add_argument("--cases", nargs="+", metavar="MODEL:BATCH:PRECISION",
                    help="only these of the models x batches x precisions (e.g. resnet50:32:fp32)")
    be.add_argument("--json", required=True)
    ke = sub.add_parser("kernels", help="eager torch's per-kernel times for one case (torch.profiler)")
    ke.add_argument("--models", required=True, help="the export directory")
    ke.add_argument("--case", required=True, metavar="MODEL:BATCH:PRECISION")
    ke.add_argument("--runs", type=int, default=5)
    ke.add_argument("--top", type=int, default=40)
    ke.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: a debug run of the code path")
    ke.add_argument("--attn", choices=["sdpa", "eager"], default="sdpa")
    args = ap.parse_args()
    if args.cmd == "export":
        if 1 not in args.batches:  # the reference output is batch 1's
            args.batches = [1] + args.batches
        cmd_export(args)
    elif args.cmd == "kernels":
        cmd_kernels(args)
    else:
        cmd_bench(args)


if __name__ == "__main__":
    main()
