#!/usr/bin/python3
"""Gradients of a small CNN and an LSTM from PyTorch (Debian python3-torch), for
tests/unit/autograd_test.cpp.

    /usr/bin/python3 tests/data/autograd/make_reference.py

writes cnn_*.npy beside this script: the input, targets, parameters, the loss and the gradient of
the loss with respect to the input and to every parameter, all in float64. The network:
conv(1->4, 3x3, pad 1) -> relu -> conv(4->6, 3x3, stride 2) -> tanh -> global average pool ->
linear(6->3) -> log_softmax -> mean negative log-likelihood of the targets.

And lstm_*.npy: an LSTM (input 4, hidden 3) over 5 steps of a batch of 2 with initial states, loss =
sum(Y^2) + sum(Y_c); weights and gradients in ONNX's layout (gates i, o, f, c; W [1, 4H, I],
R [1, 4H, H], B [1, 8H] = input bias then recurrent bias).

And gru_*.npy: a GRU (input 4, hidden 3; PyTorch's is ONNX's linear_before_reset = 1) over 5 steps
of a batch of 2 from an initial state, loss = sum(Y^2) + sum(Y_h); gates in ONNX's order z, r, h.
"""
import os

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(7)
x = torch.randn(2, 1, 8, 8, dtype=torch.float64, requires_grad=True)
targets = torch.tensor([2, 0])
params = {
    "w1": torch.randn(4, 1, 3, 3, dtype=torch.float64) * 0.5,
    "b1": torch.randn(4, dtype=torch.float64) * 0.1,
    "w2": torch.randn(6, 4, 3, 3, dtype=torch.float64) * 0.3,
    "b2": torch.randn(6, dtype=torch.float64) * 0.1,
    "w3": torch.randn(3, 6, dtype=torch.float64) * 0.5,  # Linear: y = h w3^T + b3
    "b3": torch.randn(3, dtype=torch.float64) * 0.1,
}
for p in params.values():
    p.requires_grad_(True)
h = torch.relu(torch.nn.functional.conv2d(x, params["w1"], params["b1"], padding=1))
h = torch.tanh(torch.nn.functional.conv2d(h, params["w2"], params["b2"], stride=2))
h = h.mean(dim=(2, 3))
logits = h @ params["w3"].T + params["b3"]
loss = torch.nn.functional.nll_loss(torch.log_softmax(logits, dim=1), targets)
loss.backward()

def save(name, t):
    np.save(os.path.join(here, "cnn_" + name + ".npy"), t.detach().numpy())

save("x", x)
np.save(os.path.join(here, "cnn_targets.npy"), targets.numpy().astype(np.int64))
save("loss", loss)
save("dx", x.grad)
for name, p in params.items():
    save(name, p)
    save("d" + name, p.grad)
print("loss", loss.item())

# ---- LSTM
torch.manual_seed(11)
lstm = torch.nn.LSTM(4, 3).double()
xs = torch.randn(5, 2, 4, dtype=torch.float64, requires_grad=True)
h0 = torch.randn(1, 2, 3, dtype=torch.float64, requires_grad=True)
c0 = torch.randn(1, 2, 3, dtype=torch.float64, requires_grad=True)
y, (yh, yc) = lstm(xs, (h0, c0))
lstm_loss = (y ** 2).sum() + yc.sum()
lstm_loss.backward()


def onnx_gates(t):  # PyTorch's i, f, g, o -> ONNX's i, o, f, c along axis 0
    i, f, g, o = t.chunk(4, 0)
    return torch.cat([i, o, f, g], 0)


def save_recurrent(prefix, layer, gates, loss, states):
    """The layer's ONNX-layout weights (W, R, B = input bias then recurrent bias) and their gradients,
    the loss, and each (name, tensor) of `states` with its gradient, as prefix_*.npy."""
    def save(name, t):
        np.save(os.path.join(here, prefix + "_" + name + ".npy"), t.detach().numpy())

    def weights(grad):
        pick = (lambda p: p.grad) if grad else (lambda p: p)
        return {"W": gates(pick(layer.weight_ih_l0)).unsqueeze(0), "R": gates(pick(layer.weight_hh_l0)).unsqueeze(0),
                "B": torch.cat([gates(pick(layer.bias_ih_l0)), gates(pick(layer.bias_hh_l0))]).unsqueeze(0)}

    for name, t in states:
        save(name, t)
        save("d" + name, t.grad)
    for name, t in weights(False).items():
        save(name, t)
    for name, t in weights(True).items():
        save("d" + name, t)
    save("loss", loss)


save_recurrent("lstm", lstm, onnx_gates, lstm_loss, [("x", xs), ("h0", h0), ("c0", c0)])
print("lstm loss", lstm_loss.item())

# ---- GRU
torch.manual_seed(13)
gru = torch.nn.GRU(4, 3).double()
gx = torch.randn(5, 2, 4, dtype=torch.float64, requires_grad=True)
gh0 = torch.randn(1, 2, 3, dtype=torch.float64, requires_grad=True)
gy, gyh = gru(gx, gh0)
gru_loss = (gy ** 2).sum() + gyh.sum()
gru_loss.backward()


def onnx_gru_gates(t):  # PyTorch's r, z, n -> ONNX's z, r, h along axis 0
    r, z, n = t.chunk(3, 0)
    return torch.cat([z, r, n], 0)


save_recurrent("gru", gru, onnx_gru_gates, gru_loss, [("x", gx), ("h0", gh0)])
print("gru loss", gru_loss.item())
