#!/usr/bin/python3
"""References for tests/unit/nn_test.cpp from PyTorch (Debian python3-torch), in float64:

    /usr/bin/python3 tests/data/nn/make_reference.py

writes reference.safetensors beside this script (with a safetensors writer of its own, so the test
also reads a file Ingot did not write). Keys:
  <layer>.input, <layer>.cotangent, <layer>.output, <layer>.grad_input, <layer>.param.<name> (the
  module's state_dict before the forward), <layer>.grad.<name>, and for batch norm in training
  <layer>.after.<buffer> (the running statistics after the forward). Loss = sum(output * cotangent).
  <loss>.input, <loss>.target[, <loss>.weight, <loss>.pos_weight], <loss>.loss, <loss>.grad_input.
  <opt>.p0 and <opt>.g<t> (gradients of 5 steps), <opt>.p<t> (the parameter after step t).
  clip.g0/g1 (gradients), clip.<norm>.total, clip.<norm>.g0/g1 (after clipping).
  sched.<name>.lr (and .momentum): the optimizer's values after construction and after each step().
  Modules of several inputs and outputs (LSTM, GRU, MultiheadAttention): <case>.param.<name>,
  <case>.in.<name> and <case>.grad_in.<name> (float inputs), <case>.out.<name> and
  <case>.cot.<name>; loss = sum over outputs of sum(output * cotangent).
The test code names each case's constructor arguments as this script does.
"""
import json
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(11)
torch.set_default_dtype(torch.float64)
out = {}


def put(key, t):
    # A copy: numpy views share memory with tensors that later steps change.
    out[key] = np.array(t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else t, copy=True)


def layer(name, module, x, train=True, distinct=False):
    module = module.double()
    module.train(train)
    for k, v in module.state_dict().items():
        put(f"{name}.param.{k}", v)
    x = x.clone().requires_grad_(x.dtype.is_floating_point)
    y = module(x)
    cot = torch.randn_like(y)
    (y * cot).sum().backward()
    put(f"{name}.input", x)
    put(f"{name}.cotangent", cot)
    put(f"{name}.output", y)
    if x.dtype.is_floating_point:
        put(f"{name}.grad_input", x.grad)
    for k, p in module.named_parameters():
        put(f"{name}.grad.{k}", p.grad)
    for k, b in module.named_buffers():
        put(f"{name}.after.{k}", b)


def randomize(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return module


layer("linear", nn.Linear(5, 3), torch.randn(4, 5))
layer("linear3d", nn.Linear(5, 3), torch.randn(2, 3, 5))
layer("conv2d", nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), torch.randn(2, 4, 7, 7))
layer("conv1d", nn.Conv1d(3, 4, 3, padding=1, dilation=2), torch.randn(2, 3, 9))
layer("convt", nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1), torch.randn(2, 4, 5, 5))
bn = randomize(nn.BatchNorm2d(3))
bn.running_mean.copy_(torch.randn(3) * 0.1)
bn.running_var.copy_(torch.rand(3) + 0.5)
layer("bn2d_train", bn, torch.randn(4, 3, 5, 5) * 2 + 1)
bn1 = randomize(nn.BatchNorm1d(3))
bn1.running_mean.copy_(torch.randn(3))
bn1.running_var.copy_(torch.rand(3) + 0.5)
layer("bn1d_eval", bn1, torch.randn(6, 3), train=False)
layer("layernorm", randomize(nn.LayerNorm([4, 5])), torch.randn(2, 3, 4, 5))
layer("groupnorm", randomize(nn.GroupNorm(2, 6)), torch.randn(2, 6, 4, 4))
layer("embedding", nn.Embedding(10, 4), torch.tensor([[1, 3, 3], [0, 9, 2]]))
layer("maxpool", nn.MaxPool2d(2), torch.randperm(2 * 3 * 6 * 6).reshape(2, 3, 6, 6).double() / 100)
layer("avgpool", nn.AvgPool2d(3, stride=2, padding=1), torch.randn(1, 2, 7, 7))
for name, m in [("gelu", nn.GELU()), ("silu", nn.SiLU()), ("leakyrelu", nn.LeakyReLU(0.2)),
                ("sigmoid", nn.Sigmoid()), ("tanh", nn.Tanh()), ("relu", nn.ReLU())]:
    layer(name, m, torch.randn(3, 7))
layer("flatten", nn.Flatten(), torch.randn(2, 3, 4))


def loss_case(name, fn, x, target, **extra):
    x = x.clone().requires_grad_(True)
    loss = fn(x, target)
    cot = torch.randn_like(loss)
    (loss * cot).sum().backward()
    put(f"{name}.input", x)
    put(f"{name}.target", target)
    put(f"{name}.cotangent", cot)
    put(f"{name}.loss", loss)
    put(f"{name}.grad_input", x.grad)
    for k, v in extra.items():
        put(f"{name}.{k}", v)


targets = torch.tensor([3, 1, 0, 1, 2])
w = torch.rand(4) + 0.5
loss_case("ce_plain", lambda x, t: F.cross_entropy(x, t), torch.randn(5, 4), targets)
loss_case("ce_weight_ignore", lambda x, t: F.cross_entropy(x, t, weight=w, ignore_index=1), torch.randn(5, 4), targets, weight=w)
loss_case("ce_smooth", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), torch.randn(5, 4), targets)
loss_case("ce_smooth_weight_ignore", lambda x, t: F.cross_entropy(x, t, weight=w, ignore_index=1, label_smoothing=0.2),
          torch.randn(5, 4), targets, weight=w)
loss_case("ce_sum", lambda x, t: F.cross_entropy(x, t, reduction="sum", label_smoothing=0.05), torch.randn(5, 4), targets)
loss_case("ce_none", lambda x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=0.1), torch.randn(5, 4), targets)
loss_case("ce_spatial", lambda x, t: F.cross_entropy(x, t), torch.randn(2, 3, 4, 4), torch.randint(0, 3, (2, 4, 4)))
loss_case("nll", lambda x, t: F.nll_loss(torch.log_softmax(x, 1), t, weight=w), torch.randn(5, 4), targets, weight=w)
loss_case("mse", lambda x, t: F.mse_loss(x, t), torch.randn(3, 4), torch.randn(3, 4))
pw = torch.rand(4) * 2
loss_case("bce", lambda x, t: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw), torch.randn(3, 4) * 3,
          torch.rand(3, 4), pos_weight=pw)
loss_case("bce_plain", lambda x, t: F.binary_cross_entropy_with_logits(x, t), torch.randn(3, 4) * 3, torch.rand(3, 4))

# Optimizers: 5 steps of fixed gradients.
p0 = torch.randn(3, 4)
grads = [torch.randn(3, 4) for _ in range(5)]
optimizers = {
    "sgd": lambda p: torch.optim.SGD([p], lr=0.1),
    "sgd_momentum": lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
    "sgd_nesterov": lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam": lambda p: torch.optim.Adam([p], lr=0.01, weight_decay=0.01),
    "adam_amsgrad": lambda p: torch.optim.Adam([p], lr=0.01, betas=(0.8, 0.99), amsgrad=True),
    "adamw": lambda p: torch.optim.AdamW([p], lr=0.01, weight_decay=0.1),
    "adamw_maximize": lambda p: torch.optim.AdamW([p], lr=0.01, amsgrad=True, maximize=True),
}
for name, make in optimizers.items():
    p = p0.clone().requires_grad_(True)
    opt = make(p)
    put(f"{name}.p0", p0)
    for t, g in enumerate(grads, 1):
        p.grad = g.clone()
        opt.step()
        put(f"{name}.g{t}", g)
        put(f"{name}.p{t}", p)

ga, gb = torch.randn(3, 4), torch.randn(5)
put("clip.g0", ga)
put("clip.g1", gb)
for norm, key in [(2.0, "l2"), (float("inf"), "inf"), (1.0, "l1")]:
    a = torch.zeros(3, 4, requires_grad=True)
    b = torch.zeros(5, requires_grad=True)
    a.grad, b.grad = ga.clone(), gb.clone()
    total = torch.nn.utils.clip_grad_norm_([a, b], 0.5, norm_type=norm)
    put(f"clip.{key}.total", total)
    put(f"clip.{key}.g0", a.grad)
    put(f"clip.{key}.g1", b.grad)


def schedule(name, make_opt, make_sched, steps, momentum=None):
    p = torch.zeros(2, requires_grad=True)
    opt = make_opt(p)
    sched = make_sched(opt)
    lrs, moms = [opt.param_groups[0]["lr"]], []
    if momentum:
        moms.append(momentum(opt.param_groups[0]))
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
        if momentum:
            moms.append(momentum(opt.param_groups[0]))
    put(f"sched.{name}.lr", np.array(lrs))
    if momentum:
        put(f"sched.{name}.momentum", np.array(moms))


schedule("step", lambda p: torch.optim.SGD([p], lr=0.1), lambda o: torch.optim.lr_scheduler.StepLR(o, 3, gamma=0.5), 10)
schedule("cosine", lambda p: torch.optim.SGD([p], lr=0.1), lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 10, eta_min=0.001), 10)
schedule("onecycle_sgd", lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9),
         lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=20), 19, momentum=lambda g: g["momentum"])
schedule("onecycle_adam", lambda p: torch.optim.Adam([p], lr=0.1),
         lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.05, total_steps=12, pct_start=0.25), 11,
         momentum=lambda g: g["betas"][0])


def multi(name, module, inputs, run):
    """run(module, **inputs) -> dict of outputs."""
    module = module.double()
    for k, v in module.state_dict().items():
        put(f"{name}.param.{k}", v)
    xs = {k: (v.clone().requires_grad_(True) if v.dtype.is_floating_point else v) for k, v in inputs.items()}
    outs = run(module, **xs)
    loss = 0
    for k, y in outs.items():
        cot = torch.randn_like(y)
        put(f"{name}.out.{k}", y)
        put(f"{name}.cot.{k}", cot)
        loss = loss + (y * cot).sum()
    loss.backward()
    for k, x in xs.items():
        put(f"{name}.in.{k}", x)
        if x.dtype.is_floating_point:
            put(f"{name}.grad_in.{k}", x.grad)
    for k, p in module.named_parameters():
        put(f"{name}.grad.{k}", p.grad)


def lstm_run(m, x, h0=None, c0=None):
    y, (h, c) = m(x, None if h0 is None else (h0, c0))
    return {"output": y, "h_n": h, "c_n": c}


def gru_run(m, x, h0=None):
    y, h = m(x, h0)
    return {"output": y, "h_n": h}


multi("lstm", nn.LSTM(3, 4), {"x": torch.randn(5, 2, 3)}, lstm_run)
multi("lstm2bi", nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True),
      {"x": torch.randn(2, 5, 3), "h0": torch.randn(4, 2, 4), "c0": torch.randn(4, 2, 4)}, lstm_run)
multi("gru", nn.GRU(3, 4, num_layers=2), {"x": torch.randn(5, 2, 3), "h0": torch.randn(2, 2, 4)}, gru_run)
multi("grubi", nn.GRU(3, 5, bidirectional=True, batch_first=True), {"x": torch.randn(2, 4, 3)}, gru_run)


def mha_self(m, x, key_padding_mask):
    y, w = m(x, x, x, key_padding_mask=key_padding_mask, need_weights=True)
    return {"output": y, "weights": w}


def mha_cross(m, q, kv, attn_mask):
    y, _ = m(q, kv, kv, attn_mask=attn_mask, need_weights=False)
    return {"output": y}


def mha_causal(m, x):
    mask = torch.triu(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool), diagonal=1)
    y, _ = m(x, x, x, attn_mask=mask, need_weights=False)
    return {"output": y}


def randomized_mha(*args, **kwargs):
    m = nn.MultiheadAttention(*args, **kwargs)
    with torch.no_grad():  # PyTorch zeroes the biases at initialisation; random ones test their gradients
        m.in_proj_bias.copy_(torch.randn_like(m.in_proj_bias) * 0.1)
        m.out_proj.bias.copy_(torch.randn_like(m.out_proj.bias) * 0.1)
    return m


pad = torch.zeros(2, 5, dtype=torch.bool)
pad[1, 3:] = True
multi("mha_self", randomized_mha(8, 2), {"x": torch.randn(5, 2, 8), "key_padding_mask": pad}, mha_self)
multi("mha_cross", randomized_mha(8, 4, batch_first=True),
      {"q": torch.randn(2, 3, 8), "kv": torch.randn(2, 6, 8), "attn_mask": torch.randn(3, 6)}, mha_cross)
multi("mha_causal", randomized_mha(6, 3, batch_first=True), {"x": torch.randn(2, 4, 6)}, mha_causal)


# A safetensors writer of this script's own (the format: u64 little-endian header size, a JSON
# header, the data).
def save(path, tensors, metadata):
    codes = {np.dtype("float64"): "F64", np.dtype("float32"): "F32", np.dtype("int64"): "I64", np.dtype("bool"): "BOOL"}
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for k in sorted(tensors):
        a = np.array(tensors[k], order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        if a.dtype == np.float32:
            a = a.astype(np.float64)
        b = a.tobytes()
        header[k] = {"dtype": codes[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


save(os.path.join(here, "reference.safetensors"), out, {"torch": torch.__version__, "script": "make_reference.py"})
print(f"wrote {len(out)} tensors")
