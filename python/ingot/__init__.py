"""Ingot: ONNX models and .ingot packages, eager tensors with autograd, on the CPU and NVIDIA GPUs.

    import ingot, numpy as np
    s = ingot.Session("model.onnx")                      # or a .ingot package; device="cuda"
    out = s.run({"x": np.zeros((1, 3, 224, 224), np.float32)})
    y = out["y"].numpy()                                 # the same memory, no copy

Tensors cross in and out without copies: numpy arrays (C-contiguous) and DLPack producers
(torch.Tensor, CuPy) are wrapped, and Ingot tensors leave through DLPack (``torch.from_dlpack(t)``,
``numpy.from_dlpack(t)``). Errors are ``ingot.Error`` (a RuntimeError) with Ingot's message.
"""
from ._ingot import (  # noqa: F401
    Error,
    Session,
    Tensor,
    convert,
    quantize,
    from_dlpack,
    grad,
    no_grad,
    op,
    profiler,
    synchronize,
    tensor,
    zeros,
    loaded_extensions,
    memory_in_use,
    memory_limit,
    set_memory_limit,
)
from ._ingot import CompiledFunction, compile, func, manual_seed, optim  # noqa: F401
from . import distributed, nn  # noqa: F401
from .extension import Extension, load_extension, load_extension_library  # noqa: F401

vmap = func.vmap

__all__ = ["Error", "Session", "Tensor", "convert", "quantize", "from_dlpack", "grad", "no_grad", "op", "profiler", "synchronize",
           "tensor", "zeros", "memory_in_use", "memory_limit", "set_memory_limit",
           "Extension", "load_extension", "load_extension_library", "loaded_extensions",
           "CompiledFunction", "compile", "distributed", "func", "manual_seed", "nn", "optim", "vmap"]
