#!/usr/bin/python3
"""Gradients of a small CNN from PyTorch (Debian python3-torch), for tests/unit/autograd_test.cpp.

    /usr/bin/python3 tests/data/autograd/make_reference.py

writes cnn_*.npy beside this script: the input, targets, parameters, the loss and the gradient of
the loss with respect to the input and to every parameter, all in float64. The network:
conv(1->4, 3x3, pad 1) -> relu -> conv(4->6, 3x3, stride 2) -> tanh -> global average pool ->
linear(6->3) -> log_softmax -> mean negative log-likelihood of the targets.
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
