"""Eager autograd from Python against PyTorch's (float64, the same computation)."""
import numpy as np
import pytest

import ingot

torch = pytest.importorskip("torch")


def test_a_small_network_gradients_match_pytorch():
    rng = np.random.default_rng(3)
    x_np, w_np, b_np = rng.standard_normal((5, 4)), rng.standard_normal((4, 3)), rng.standard_normal(3)
    x = ingot.tensor(x_np.copy(), requires_grad=True)
    w = ingot.tensor(w_np.copy(), requires_grad=True)
    b = ingot.tensor(b_np.copy(), requires_grad=True)
    h = ingot.op("Tanh", x @ w + b)
    loss = ingot.op("ReduceSum", h * h, keepdims=0)
    loss.backward()

    xt, wt, bt = (torch.tensor(v, requires_grad=True) for v in (x_np, w_np, b_np))
    ht = torch.tanh(xt @ wt + bt)
    (ht * ht).sum().backward()
    np.testing.assert_allclose(loss.item(), (ht * ht).sum().item(), rtol=1e-12)
    for ours, theirs in ((x, xt), (w, wt), (b, bt)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_second_order_through_grad_matches_pytorch():
    v = np.array([0.3, -1.2, 2.0])
    x = ingot.tensor(v.copy(), requires_grad=True)
    y = ingot.op("ReduceSum", ingot.op("Sin", x) * x, keepdims=0)
    (g,) = ingot.grad([y], [x], create_graph=True)
    (gg,) = ingot.grad([ingot.op("ReduceSum", g, keepdims=0)], [x])

    xt = torch.tensor(v, requires_grad=True)
    (gt,) = torch.autograd.grad((torch.sin(xt) * xt).sum(), xt, create_graph=True)
    (ggt,) = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(g.numpy(), gt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(gg.numpy(), ggt.numpy(), rtol=1e-12)


def test_no_grad_records_nothing():
    x = ingot.tensor(np.ones(3), requires_grad=True)
    with ingot.no_grad():
        y = x * 2
    assert not y.requires_grad
    assert (x * 2).requires_grad
