// What the parts of `import ingot` share (src/python/*.cpp): tensors from Python objects, and each
// part's bind function, called by PYBIND11_MODULE in module.cpp.
#pragma once
#include <ingot/tensor.h>
#include <pybind11/pybind11.h>

namespace ingot::python {

// An ingot.Tensor, a numpy array or a DLPack producer (no copy where the memory allows), or
// anything numpy.asarray takes.
Tensor tensor_from(const pybind11::object& obj);
DType dtype_from(const pybind11::object& dtype);

// training.cpp: ingot.nn (modules, losses), ingot.optim (optimizers, clipping, schedules) and the
// function transforms (grad, value_and_grad, vjp, jvp, vmap, compile).
void bind_training(pybind11::module_& m);

}  // namespace ingot::python
