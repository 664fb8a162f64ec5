#!/usr/bin/env python3
"""PyTorch side of bench/gpu_bench.cpp, run in the same call on the GPU machine: the same problems
(device copy, elementwise add, 4096^3 matmuls, ResNet-50 conv layers at batch 32 with
cudnn.benchmark on, TF32 off), timed with CUDA events (median of repeats after warm-up), printed
next to Ingot's numbers from --ingot-json."""
import argparse
import json

import torch


def time_ms(fn, iterations=20, repeats=7):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) / iterations)
    samples.sort()
    return samples[len(samples) // 2]


LAYERS = [("conv1 7x7/2 3->64 @224", 3, 224, 64, 7, 2), ("res2 1x1 64->64 @56", 64, 56, 64, 1, 1),
          ("res2 3x3 64->64 @56", 64, 56, 64, 3, 1), ("res2 1x1 64->256 @56", 64, 56, 256, 1, 1),
          ("res3 3x3/2 128->128 @56", 128, 56, 128, 3, 2), ("res3 3x3 128->128 @28", 128, 28, 128, 3, 1),
          ("res4 3x3 256->256 @14", 256, 14, 256, 3, 1), ("res4 1x1 1024->256 @14", 1024, 14, 256, 1, 1),
          ("res5 3x3 512->512 @7", 512, 7, 512, 3, 1), ("res5 1x1 512->2048 @7", 512, 7, 2048, 1, 1)]
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ingot-json", required=True)
    parser.add_argument("--elements", type=int, default=1 << 28)
    args = parser.parse_args()
    ingot = json.load(open(args.ingot_json))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = "cuda"
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    rows = []
    n = args.elements
    a, b = torch.rand(n, device=dev) - 0.5, torch.rand(n, device=dev) - 0.5
    c = torch.empty_like(a)
    copy_ms = time_ms(lambda: c.copy_(a))
    add_ms = time_ms(lambda: torch.add(a, b))
    copy_gbs, add_gbs = 2 * 4 * n / copy_ms / 1e6, 3 * 4 * n / add_ms / 1e6
    rows.append(("copy GB/s", ingot["copy"]["gb_per_s"], copy_gbs))
    rows.append(("add GB/s", ingot["add"]["gb_per_s"], add_gbs))
    rows.append(("add / Ingot's copy", ingot["add"]["fraction_of_copy"], add_gbs / ingot["copy"]["gb_per_s"]))
    del a, b, c
    for name, dt in DTYPES.items():
        m = 4096
        x, y = torch.randn(m, m, device=dev, dtype=dt), torch.randn(m, m, device=dev, dtype=dt)
        ms = time_ms(lambda: torch.matmul(x, y), 10, 5)
        rows.append((f"matmul 4096^3 {name} TFLOP/s", ingot["matmul"][name]["tflops"], 2 * m ** 3 / ms / 1e9))
    for name in ("float16", "float32"):
        dt = DTYPES[name]
        for label, cin, hw, cout, k, s in LAYERS:
            x = torch.randn(32, cin, hw, hw, device=dev, dtype=dt)
            w = torch.randn(cout, cin, k, k, device=dev, dtype=dt)
            ms = time_ms(lambda: torch.nn.functional.conv2d(x, w, stride=s, padding=k // 2), 10, 5)
            rows.append((f"conv {label} {name} ms", ingot["conv"][name][label]["ms"], ms))
    print(f"{'problem':<44} {'ingot':>10} {'torch':>10} {'ingot/torch':>12}")
    for label, mine, theirs in rows:
        print(f"{label:<44} {mine:>10.3f} {theirs:>10.3f} {mine / theirs:>12.3f}")
    json.dump({"rows": rows}, open(args.ingot_json.replace(".json", "-torch.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
