"""Layers, losses and the Module base class, after torch.nn.

The layers (Linear, Conv2d, BatchNorm2d, LayerNorm, Dropout, ...) are Ingot's own modules, with
PyTorch's constructor arguments, defaults, parameter names and initialization. Models written in
Python subclass ``ingot.nn.Module`` as they would torch.nn.Module: attributes that are modules or
tensors that require gradients are found by ``parameters()``, ``state_dict()``, ``train()``,
``to()`` and ``zero_grad()``; ``Sequential`` chains any modules.

    class Net(ingot.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = ingot.nn.Sequential(ingot.nn.Linear(784, 256), ingot.nn.ReLU(), ingot.nn.Linear(256, 10))
        def forward(self, x):
            return self.body(x)
"""
from __future__ import annotations

from typing import Iterator

from . import _ingot
from ._ingot.nn import (  # noqa: F401
    AvgPool2d, BatchNorm1d, BatchNorm2d, Conv1d, Conv2d, ConvTranspose2d, Dropout, Embedding, Flatten, GELU,
    GlobalAvgPool, GroupNorm, LayerNorm, LeakyReLU, Linear, MaxPool2d, ReLU, SiLU, Sigmoid, Tanh, functional,
)

_CppModule = _ingot.nn._CppModule


def _is_module(v) -> bool:
    return isinstance(v, (Module, _CppModule))


class Module:
    """The base class of models written in Python (torch.nn.Module's role)."""

    def __init__(self):
        object.__setattr__(self, "training", True)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} defines no forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def named_children(self) -> Iterator[tuple[str, object]]:
        for name, v in vars(self).items():
            if _is_module(v):
                yield name, v

    def children(self):
        return [m for _, m in self.named_children()]

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, _ingot.Tensor]]:
        for name, v in vars(self).items():
            if isinstance(v, _ingot.Tensor) and v.requires_grad:
                yield prefix + name, v
            elif isinstance(v, Module):
                yield from v.named_parameters(prefix + name + ".")
            elif isinstance(v, _CppModule):
                for n, p in v.named_parameters():
                    yield prefix + name + "." + n, p

    def parameters(self) -> list:
        return [p for _, p in self.named_parameters()]

    def named_buffers(self, prefix: str = "") -> Iterator[tuple[str, _ingot.Tensor]]:
        """The buffers of the Ingot modules inside (batch norm's running statistics), named as state_dict keys."""
        for name, v in vars(self).items():
            if isinstance(v, Module):
                yield from v.named_buffers(prefix + name + ".")
            elif isinstance(v, _CppModule):
                for n, b in v.named_buffers():
                    yield prefix + name + "." + n, b

    def state_dict(self, prefix: str = "") -> dict:
        out = {}
        for name, v in vars(self).items():
            if isinstance(v, _ingot.Tensor) and v.requires_grad:
                out[prefix + name] = v
            elif isinstance(v, Module):
                out.update(v.state_dict(prefix + name + "."))
            elif isinstance(v, _CppModule):
                out.update({prefix + name + "." + k: t for k, t in v.state_dict().items()})
        return out

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Copies each value into the parameter or buffer of that name, in place (optimizers keep theirs)."""
        own = self.state_dict()
        if strict:
            missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
            if missing or unexpected:
                raise _ingot.Error(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        for name, v in vars(self).items():
            sub = {k[len(name) + 1:]: t for k, t in state.items() if k.startswith(name + ".")}
            if isinstance(v, Module):
                v.load_state_dict(sub, strict=False)
            elif isinstance(v, _CppModule) and sub:
                v.load_state_dict(sub, strict=False)
            elif isinstance(v, _ingot.Tensor) and name in state:
                _ingot._copy_into(state[name], v)

    def train(self, mode: bool = True):
        object.__setattr__(self, "training", mode)
        for _, m in self.named_children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def to(self, device_or_dtype):
        """Moves (or converts) every parameter and buffer; do it before creating an optimizer."""
        for name, v in list(vars(self).items()):
            if _is_module(v):
                v.to(device_or_dtype)
            elif isinstance(v, _ingot.Tensor) and v.requires_grad:
                t = v.detach().to(device_or_dtype) if isinstance(device_or_dtype, str) and \
                    (device_or_dtype == "cpu" or device_or_dtype.startswith("cuda")) else v.detach().astype(device_or_dtype)
                t.requires_grad = True
                object.__setattr__(self, name, t)
        return self

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


class Sequential(Module):
    """Modules applied in turn, named "0", "1", ... (torch.nn.Sequential)."""

    def __init__(self, *modules):
        super().__init__()
        for i, m in enumerate(modules):
            if not _is_module(m):
                raise TypeError(f"Sequential: argument {i} is a {type(m).__name__}, not a module")
            object.__setattr__(self, str(i), m)

    def __len__(self) -> int:
        return sum(1 for _ in self.named_children())

    def __getitem__(self, i: int):
        return getattr(self, str(i % len(self)))

    def forward(self, x):
        for _, m in self.named_children():
            x = m(x)
        return x
