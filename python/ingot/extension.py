"""User ops: an extension's C++/CUDA sources compiled just in time, cached, and loaded into Ingot.

    ext = ingot.load_extension("softshrink", sources=["softshrink.cpp", "softshrink.cu"])
    y = ext.Softshrink(x, lambd=0.5)                  # or ingot.op("Softshrink", x, domain=..., lambd=0.5)

The sources define their ops with <ingot/extension.h> (docs/CUSTOM_OPS.md). An unchanged extension
loads from the cache without compiling; a changed one is rebuilt; a compile error is raised as
ingot.Error with the compiler's message.
"""
from __future__ import annotations

import os
from typing import Callable, Iterable, Optional, Sequence

from . import _ingot


class Extension:
    """A loaded extension: its ops as methods (``ext.Softshrink(x, lambd=0.5)``) and its build facts."""

    def __init__(self, info: "_ingot.ExtensionInfo"):
        self.info = info
        self._ops = {}
        for full in info.ops:
            domain, _, name = full.rpartition("::")
            self._ops[name] = domain

    name = property(lambda self: self.info.name)
    library = property(lambda self: self.info.library, doc="the shared library loaded")
    digest = property(lambda self: self.info.digest, doc="XXH64 of the library's bytes")
    ops = property(lambda self: list(self.info.ops), doc="'domain::Name' of each op")
    compiled = property(lambda self: self.info.compiled, doc="whether this load compiled it")
    seconds = property(lambda self: self.info.seconds, doc="the load's wall time")

    def __getattr__(self, op: str) -> Callable:
        ops = self.__dict__.get("_ops", {})
        if op not in ops:
            raise AttributeError(f"extension '{self.info.name}' has no op {op!r} (its ops: {', '.join(self.info.ops)})")
        domain = ops[op]

        def call(*inputs, num_outputs: int = -1, **attrs):
            return _ingot.op(op, *inputs, domain=domain, num_outputs=num_outputs, **attrs)

        call.__name__ = op
        call.__doc__ = f"Runs {domain}::{op} eagerly (ingot.op with its domain)."
        return call

    def __repr__(self) -> str:
        return f"<ingot.Extension {self.info.name} ({', '.join(self.info.ops)}) from {self.info.library}>"


def _strings(values: Optional[Iterable[str]], what: str) -> list:
    if values is None:
        return []
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{what} must be a list of strings, not a single string")
    return [os.fspath(v) for v in values]


def load_extension(name: str, sources: Sequence[str], extra_cflags: Optional[Sequence[str]] = None,
                   extra_cuda_cflags: Optional[Sequence[str]] = None, extra_ldflags: Optional[Sequence[str]] = None,
                   extra_include_paths: Optional[Sequence[str]] = None, build_directory: Optional[str] = None,
                   verbose: bool = False, jobs: int = 0, cuda_arch: Optional[str] = None) -> Extension:
    """Compiles (or finds in the cache) and loads an extension; its ops are usable at once.

    Arguments follow torch.utils.cpp_extension.load: ``sources`` (.cpp/.cc/.cxx/.c for the system
    compiler, .cu for nvcc), extra flags and include paths, ``build_directory`` (default
    $INGOT_EXTENSIONS_DIR or ~/.cache/ingot/extensions; refused when writable by group or others),
    ``jobs`` (compilers at once; default $INGOT_EXTENSION_JOBS, $MAX_JOBS or min(cores, 4)),
    ``cuda_arch`` ("sm_90"; default the GPU's). Raises ingot.Error with the compiler's message when a
    source does not compile.
    """
    info = _ingot._load_extension(name, _strings(sources, "sources"), _strings(extra_cflags, "extra_cflags"),
                                  _strings(extra_cuda_cflags, "extra_cuda_cflags"),
                                  _strings(extra_ldflags, "extra_ldflags"),
                                  _strings(extra_include_paths, "extra_include_paths"),
                                  os.fspath(build_directory) if build_directory else "", verbose, jobs, cuda_arch or "")
    return Extension(info)


def load_extension_library(path: str) -> Extension:
    """Loads an extension library built beforehand (the shared library load_extension builds)."""
    return Extension(_ingot._load_extension_library(os.fspath(path)))
