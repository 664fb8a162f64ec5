#!/usr/bin/env python3
"""PyTorch's side of bench/autograd_bench.cpp: the same measurements, printed as JSON.

    python3 bench/autograd_torch.py [--device cpu|cuda]

op_ns: a tiny add of two one-element float32 tensors; op_recorded_ns: the same with autograd
recording; backward_ns: add + backward minus the recorded add; the MLP step (784-256-10, batch 32,
cross-entropy, SGD 0.01) eager, and torch.compile'd where the installed torch has it. Times are
from Python, so they include the interpreter's cost of each call (PyTorch's usual front end).
"""
import argparse
import json
import time

import torch


def per_call_ns(fn, calls, samples, sync, host_only=False):
    """Median time per call over `samples` runs of `calls` back-to-back calls. host_only times the
    calls without waiting for the device (drained between samples; bench/autograd_bench.cpp's
    host_ns), else up to the device's completion (per_call_ns there)."""
    for _ in range(calls if host_only else calls // 10 + 1):
        fn()
    sync()
    t = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        if not host_only:
            sync()
        t.append((time.perf_counter() - start) * 1e9 / calls)
        sync()
    t.sort()
    return t[len(t) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (default: torch's)")
    args = ap.parse_args()
    dev = torch.device(args.device)
    sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)
    torch.set_num_threads(args.threads if args.threads > 0 else max(1, torch.get_num_threads()))
    g = torch.Generator().manual_seed(1)
    a = torch.rand(1, generator=g).to(dev)
    b = torch.rand(1, generator=g).to(dev)
    out = {"device": args.device, "torch": torch.__version__, "threads": torch.get_num_threads()}
    with torch.no_grad():
        out["op_ns"] = per_call_ns(lambda: torch.add(a, b), 20000, 9, sync)
    ag = a.clone().requires_grad_(True)
    out["op_recorded_ns"] = per_call_ns(lambda: torch.add(ag, b), 20000, 9, sync)
    fb = per_call_ns(lambda: torch.add(ag, b).backward(), 5000, 9, sync)
    out["backward_ns"] = fb - out["op_recorded_ns"]
    with torch.no_grad():
        out["op_host_ns"] = per_call_ns(lambda: torch.add(a, b), 200, 15, sync, host_only=True)
    out["op_recorded_host_ns"] = per_call_ns(lambda: torch.add(ag, b), 200, 15, sync, host_only=True)
    out["backward_host_ns"] = per_call_ns(lambda: torch.add(ag, b).backward(), 100, 15, sync, host_only=True) - out["op_recorded_host_ns"]

    params = [(torch.rand(s, generator=g) * 2 - 1).mul(sc).to(dev).requires_grad_(True)
              for s, sc in [((784, 256), 0.05), ((256,), 0.01), ((256, 10), 0.05), ((10,), 0.01)]]
    x = (torch.rand(32, 784, generator=g) * 2 - 1).to(dev)
    y = (torch.arange(32) % 10).to(dev)

    def step(w1, b1, w2, b2, x, y):
        loss = torch.nn.functional.cross_entropy(torch.relu(x @ w1 + b1) @ w2 + b2, y)
        gs = torch.autograd.grad(loss, [w1, b1, w2, b2])
        with torch.no_grad():
            return [p - 0.01 * gp for p, gp in zip([w1, b1, w2, b2], gs)]

    state = {"p": params}

    def eager():
        state["p"] = [p.requires_grad_(True) for p in step(*state["p"], x, y)]

    out["mlp_step_eager_us"] = per_call_ns(eager, 20, 9, sync) / 1000
    if hasattr(torch, "compile"):
        try:
            compiled = torch.compile(step)
            state["p"] = params

            def comp():
                state["p"] = [p.requires_grad_(True) for p in compiled(*state["p"], x, y)]

            out["mlp_step_compiled_us"] = per_call_ns(comp, 20, 9, sync) / 1000
        except Exception as e:  # torch.compile needs a compiler toolchain on the machine
            out["mlp_step_compiled_error"] = str(e).splitlines()[0]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
