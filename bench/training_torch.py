#!/usr/bin/python3
"""PyTorch's side of bench/training_bench.cpp: the same models, data, losses, optimizers and timing.

    bench/training_torch.py --model resnet50|transformer|fashion [--device cuda] [--precision fp32|bf16|fp16]
                            [--compile] [--batch N] [--steps N] [--warmup N] [--threads N] [--json FILE]

Data-parallel (the side-by-side of `ingot-bench-training --gpus N`): run it under torchrun,
    python3 -m torch.distributed.run --nproc_per_node N bench/training_torch.py --model resnet50 ...
and each rank trains its own --batch under DistributedDataParallel (NCCL on CUDA, Gloo on the CPU);
rank 0 prints the row, samples/s counting every rank's batches.

resnet50 is torchvision's; transformer is 4 nn.TransformerEncoderLayer(384, 6, 1536, GELU, pre-norm,
dropout 0, batch_first) and a final LayerNorm; fashion is bench/fashion_mnist_torch.py's network.
bf16 / fp16 run the forward under torch.autocast (fp16 with a GradScaler); --compile wraps the model
in torch.compile (its compile time is in the warm-up steps, reported apart).
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fashion_mnist_torch import network as fashion_network  # noqa: E402


def transformer():
    layers = [nn.TransformerEncoderLayer(384, 6, 1536, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
              for _ in range(4)]
    return nn.Sequential(*layers, nn.LayerNorm(384))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="fashion", choices=["resnet50", "transformer", "fashion"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (torch.set_num_threads)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    dev = torch.device(args.device)
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
        if dev.type == "cuda":
            dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
            torch.cuda.set_device(dev)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    if args.model == "resnet50":
        import torchvision
        batch = args.batch or 128
        net = torchvision.models.resnet50()
        x = torch.randn(batch, 3, 224, 224, generator=g)
        y = torch.arange(batch) * 7919 % 1000
    elif args.model == "transformer":
        batch = args.batch or 8
        net = transformer()
        x = torch.randn(batch, 1500, 384, generator=g)
        y = torch.randn(batch, 1500, 384, generator=g)
    else:
        batch = args.batch or 128
        net = fashion_network()
        x = torch.randn(batch, 1, 28, 28, generator=g)
        y = torch.arange(batch) * 7919 % 10
    net = net.to(dev)
    x, y = x.to(dev), y.to(dev)
    if args.model == "resnet50":
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    else:
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4 if args.model == "transformer" else 1e-3)
    loss_fn = nn.functional.mse_loss if args.model == "transformer" else nn.functional.cross_entropy
    model = net
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(net, device_ids=[dev.index] if dev.type == "cuda" else None)
    model = torch.compile(model) if args.compile else model
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    fp16 = args.precision == "fp16"
    scaler = torch.amp.GradScaler(dev.type, enabled=fp16) if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler(enabled=fp16)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=low or torch.bfloat16, enabled=low is not None):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    t0 = time.perf_counter()
    for _ in range(args.warmup):
        step().item()
    warmup_s = time.perf_counter() - t0
    sync()
    if world > 1:
        dist.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    final = loss.item()
    seconds = time.perf_counter() - start
    if world > 1 and dist.get_rank() != 0:
        return
    out = {"model": args.model, "device": args.device, "precision": args.precision, "compile": args.compile,
           "batch": batch, "steps": args.steps, "ms_per_step": 1e3 * seconds / args.steps,
           "samples_per_s": batch * world * args.steps / seconds, "processes": world, "final_loss": final, "warmup_s": warmup_s,
           "parameters": sum(p.numel() for p in net.parameters()), "torch": torch.__version__,
           "threads": torch.get_num_threads()}
    print(json.dumps(out), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
