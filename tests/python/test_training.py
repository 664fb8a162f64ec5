"""ingot.nn, ingot.optim and the transforms from Python against PyTorch (float64, the same weights):
a model written as an ingot.nn.Module, its loss, gradients and optimizer steps (SGD with momentum,
Adam, AdamW), state_dict round trips, and grad / vjp / jvp / vmap / compile."""
import numpy as np
import pytest

import ingot

torch = pytest.importorskip("torch")


class Net(ingot.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = ingot.nn.Sequential(ingot.nn.Linear(6, 16), ingot.nn.ReLU(), ingot.nn.Linear(16, 4))
        self.scale = ingot.tensor(np.array([1.5], np.float32), requires_grad=True)  # a parameter held directly

    def forward(self, x):
        return self.body(x) * self.scale


def torch_net(net):
    t = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).double()
    with torch.no_grad():
        for (name, p), (tname, tp) in zip([kv for kv in net.named_parameters() if kv[0] != "scale"],
                                          t.named_parameters()):
            assert name == "body." + tname  # PyTorch's parameter names
            tp.copy_(torch.from_numpy(p.numpy()))
    scale = torch.tensor([1.5], dtype=torch.float64, requires_grad=True)
    return t, scale


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
def test_training_steps_match_pytorch(optimizer):
    ingot.manual_seed(0)
    net = Net().to("float64")
    tnet, tscale = torch_net(net)
    rng = np.random.default_rng(1)
    params, tparams = net.parameters(), list(tnet.parameters()) + [tscale]
    assert [p.shape for p in params] == [tuple(p.shape) for p in tparams]
    if optimizer == "sgd":
        opt = ingot.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-3, nesterov=True)
        topt = torch.optim.SGD(tparams, lr=0.1, momentum=0.9, weight_decay=1e-3, nesterov=True)
    elif optimizer == "adam":
        opt, topt = ingot.optim.Adam(params, lr=1e-2), torch.optim.Adam(tparams, lr=1e-2)
    else:
        opt, topt = ingot.optim.AdamW(params, lr=1e-2), torch.optim.AdamW(tparams, lr=1e-2)
    for step in range(4):
        x = rng.standard_normal((8, 6))
        y = rng.integers(0, 4, 8)
        loss = ingot.nn.functional.cross_entropy(net(x), y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        tloss = torch.nn.functional.cross_entropy(tnet(torch.from_numpy(x)) * tscale, torch.from_numpy(y),
                                                  label_smoothing=0.1)
        topt.zero_grad()
        tloss.backward()
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-12)
        for p, tp in zip(params, tparams):
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-10, atol=1e-12)
        opt.step()
        topt.step()
        for p, tp in zip(params, tparams):
            np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=f"step {step}")


def test_state_dict_round_trip_and_modes():
    a, b = Net(), Net()
    assert sorted(a.state_dict()) == ["body.0.bias", "body.0.weight", "body.2.bias", "body.2.weight", "scale"]
    b.load_state_dict(a.state_dict())
    x = np.random.default_rng(2).standard_normal((3, 6)).astype(np.float32)
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())
    with pytest.raises(ingot.Error, match="missing keys"):
        b.load_state_dict({"body.0.weight": a.state_dict()["body.0.weight"]})
    drop = ingot.nn.Sequential(ingot.nn.Dropout(0.5))
    ones = np.ones((1000,), np.float32)
    assert drop.eval()(ones).numpy().tolist() == ones.tolist()  # eval: identity
    kept = drop.train()(ones).numpy()
    assert set(np.unique(kept).tolist()) <= {0.0, 2.0} and 400 < (kept > 0).sum() < 600


def test_layers_match_pytorch():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 9, 9))
    conv = ingot.nn.Conv2d(3, 5, 3, stride=2, padding=1).to("float64")
    tconv = torch.nn.Conv2d(3, 5, 3, stride=2, padding=1).double()
    with torch.no_grad():
        tconv.weight.copy_(torch.from_numpy(conv.weight.numpy()))
        tconv.bias.copy_(torch.from_numpy(conv.bias.numpy()))
    np.testing.assert_allclose(conv(x).numpy(), tconv(torch.from_numpy(x)).detach().numpy(), rtol=1e-12, atol=1e-12)
    bn, tbn = ingot.nn.BatchNorm2d(3).to("float64"), torch.nn.BatchNorm2d(3).double()
    np.testing.assert_allclose(bn(x).numpy(), tbn(torch.from_numpy(x)).detach().numpy(), rtol=1e-10, atol=1e-12)
    # momentum is a float32 attribute (ONNX BatchNormalization's): 0.1f, not 0.1
    np.testing.assert_allclose(bn.running_var.numpy(), tbn.running_var.numpy(), rtol=1e-8)
    ln, tln = ingot.nn.LayerNorm(9).to("float64"), torch.nn.LayerNorm(9).double()
    np.testing.assert_allclose(ln(x).numpy(), tln(torch.from_numpy(x)).detach().numpy(), rtol=1e-10, atol=1e-12)


def test_function_transforms_match_pytorch():
    v = np.array([0.3, -1.2, 2.0])

    def f(x):
        return ingot.op("ReduceSum", ingot.op("Sin", x) * x, keepdims=0)

    xt = torch.tensor(v, requires_grad=True)
    (want,) = torch.autograd.grad((torch.sin(xt) * xt).sum(), xt)
    np.testing.assert_allclose(ingot.func.grad(f)(v).numpy(), want.numpy(), rtol=1e-14)
    value, g = ingot.func.value_and_grad(f)(v)
    np.testing.assert_allclose(value.item(), (np.sin(v) * v).sum(), rtol=1e-14)
    np.testing.assert_allclose(g.numpy(), want.numpy(), rtol=1e-14)

    def h(x):
        return ingot.op("Tanh", x) * x

    out, pullback = ingot.func.vjp(h, v)
    u = np.array([1.0, -2.0, 0.5])
    _, tvjp = torch.autograd.functional.vjp(lambda t: torch.tanh(t) * t, torch.tensor(v), torch.tensor(u))
    np.testing.assert_allclose(pullback(u).numpy(), tvjp.numpy(), rtol=1e-14)
    _, tangent = ingot.func.jvp(h, (v,), (u,))
    _, tjvp = torch.autograd.functional.jvp(lambda t: torch.tanh(t) * t, torch.tensor(v), torch.tensor(u))
    np.testing.assert_allclose(tangent.numpy(), tjvp.numpy(), rtol=1e-14)

    # vmap: per-example gradients of a linear model's squared error, against a loop.
    rng = np.random.default_rng(4)
    w, xs, ys = rng.standard_normal(3), rng.standard_normal((5, 3)), rng.standard_normal(5)

    def loss(w, x, y):
        d = ingot.op("ReduceSum", w * x, keepdims=0) - y
        return d * d

    per_example = ingot.vmap(ingot.func.grad(loss), in_dims=(None, 0, 0))(w, xs, ys).numpy()
    for i in range(5):
        np.testing.assert_allclose(per_example[i], 2 * (w @ xs[i] - ys[i]) * xs[i], rtol=1e-12)

    # compile: the same values, one trace per signature.
    c = ingot.compile(lambda a, b: ingot.op("Tanh", a * b + b))
    a, b = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    np.testing.assert_allclose(c(a, b).numpy(), np.tanh(a * b + b), rtol=1e-14)
    c(a + 1, b)
    assert c.traces == 1
    c(rng.standard_normal((2, 4)), rng.standard_normal((2, 4)))
    assert c.traces == 2
    assert "Tanh" in c.graph(a, b) or "FusedElementwise" in c.graph(a, b)
