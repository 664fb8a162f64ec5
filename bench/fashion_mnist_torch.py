#!/usr/bin/python3
"""The Fashion-MNIST example's network and training step in PyTorch, for side-by-side numbers with
apps/fashion-mnist (docs/TRAINING.md): the same architecture, AdamW lr 1e-3, batch 128, the same
normalization; reads Debian's dataset-fashion-mnist idx files.

    bench/fashion_mnist_torch.py [--device cpu|cuda] [--precision fp32|bf16|fp16] [--epochs N] [--limit N]
                                 [--threads N] [--json FILE]

bf16 / fp16 run the forward under torch.autocast (fp16 with a torch.amp.GradScaler), as the example's
--precision does.
"""
import argparse
import gzip
import json
import time

import numpy as np
import torch
import torch.nn as nn


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def network():
    def block(i, o):
        return [nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU()]
    return nn.Sequential(*block(1, 32), *block(32, 64), nn.MaxPool2d(2), *block(64, 128), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(6272, 256), nn.ReLU(), nn.Dropout(0.3), nn.Linear(256, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    torch.manual_seed(0)
    x = read_idx(f"{args.data}/train-images-idx3-ubyte.gz")
    y = read_idx(f"{args.data}/train-labels-idx1-ubyte.gz")
    tx = read_idx(f"{args.data}/t10k-images-idx3-ubyte.gz")
    ty = read_idx(f"{args.data}/t10k-labels-idx1-ubyte.gz")
    if args.limit:
        x, y = x[:args.limit], y[:args.limit]
    norm = lambda a: torch.from_numpy(((a.astype(np.float32) / 255 - 0.2860) / 0.3530)[:, None])
    x, tx = norm(x), norm(tx)
    y, ty = torch.from_numpy(y.astype(np.int64)), torch.from_numpy(ty.astype(np.int64))
    net = network().to(dev)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    autocast = lambda: torch.autocast(dev.type, dtype=low, enabled=low is not None)
    fp16 = args.precision == "fp16"
    scaler = torch.amp.GradScaler(dev.type, enabled=fp16) if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler(enabled=fp16)
    sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)
    seconds, samples, loss_value, acc = 0.0, 0, 0.0, 0.0
    for epoch in range(args.epochs):
        net.train()
        order = torch.randperm(len(x))
        sync()
        start = time.perf_counter()
        total = 0.0
        for b in range(0, len(x), args.batch):
            idx = order[b:b + args.batch]
            xb, yb = x[idx].to(dev, non_blocking=True), y[idx].to(dev, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            with autocast():
                loss = nn.functional.cross_entropy(net(xb), yb)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            total += loss.item() * len(idx)  # a wait per step, as a typical script
        sync()
        elapsed = time.perf_counter() - start
        seconds += elapsed
        samples += len(x)
        loss_value = total / len(x)
        net.eval()
        correct = 0
        with torch.no_grad():
            for b in range(0, len(tx), 1000):
                with autocast():
                    logits = net(tx[b:b + 1000].to(dev))
                correct += int((logits.argmax(1).cpu() == ty[b:b + 1000]).sum())
        acc = correct / len(tx)
        print(f"epoch {epoch + 1}: train loss {loss_value:.4f}, test accuracy {100 * acc:.2f}%, {elapsed:.1f} s", flush=True)
    out = {"test_accuracy": acc, "epochs": args.epochs, "seconds_per_epoch": seconds / args.epochs,
           "samples_per_s": samples / seconds, "final_loss": loss_value, "torch": torch.__version__,
           "threads": torch.get_num_threads(), "device": args.device,
           "precision": args.precision}
    print(json.dumps(out))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
