// A test extension (CPU kernels only, so CI's machine without a GPU builds and runs it):
//  - test.ext::Softshrink (PyTorch's softshrink) with a gradient op, SoftshrinkGrad, which has one too
//    (second order);
//  - test.ext::RepeatRows, whose output shape differs from its input's (a shape rule), on int64 and
//    float inputs alike.
// Used by tests/unit/extension_test.cpp and tests/python/test_extension.py.
#include <ingot/extension.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace {

using ingot::ext::KernelContext;
using ingot::ext::TensorRef;

template <class T>
void softshrink(const T* x, T* y, int64_t n, float lambd) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(lambd) ? x[i] - T(lambd) : x[i] < T(-lambd) ? x[i] + T(lambd) : T(0);
}

void softshrink_cpu(KernelContext& ctx) {
  const TensorRef x = ctx.input(0);
  const TensorRef y = ctx.output(0, x.dtype(), x.shape());
  const float lambd = ctx.attr_float("lambd");
  if (lambd < 0) throw std::invalid_argument("lambd must be >= 0, got " + std::to_string(lambd));
  if (x.dtype() == ingot::ext::kFloat32) {
    ctx.parallel_for(x.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      softshrink(x.data<float>() + b, y.data<float>() + b, e - b, lambd);
    });
  } else {
    softshrink(x.data<double>(), y.data<double>(), x.numel(), lambd);
  }
}

// dX = dY where |X| > lambd, else 0. Inputs: X, Y, dY.
template <class T>
void softshrink_grad(const T* x, const T* dy, T* dx, int64_t n, float lambd) {
  for (int64_t i = 0; i < n; ++i) dx[i] = std::fabs(double(x[i])) > double(lambd) ? dy[i] : T(0);
}

void softshrink_grad_cpu(KernelContext& ctx) {
  const TensorRef x = ctx.input(0), dy = ctx.input(2);
  const TensorRef dx = ctx.output(0, x.dtype(), x.shape());
  const float lambd = ctx.attr_float("lambd");
  if (x.dtype() == ingot::ext::kFloat32)
    softshrink_grad(x.data<float>(), dy.data<float>(), dx.data<float>(), x.numel(), lambd);
  else
    softshrink_grad(x.data<double>(), dy.data<double>(), dx.data<double>(), x.numel(), lambd);
}

// SoftshrinkGrad's own gradient (inputs X, Y, dY, its outputs dX, and d(dX)): zero for X and Y (the
// mask is piecewise constant), the same mask for dY.
void softshrink_grad_grad_cpu(KernelContext& ctx) {
  const TensorRef x = ctx.input(0), y = ctx.input(1), ddx = ctx.input(4);
  const float lambd = ctx.attr_float("lambd");
  const TensorRef gx = ctx.output(0, x.dtype(), x.shape());
  const TensorRef gy = ctx.output(1, y.dtype(), y.shape());
  const TensorRef gdy = ctx.output(2, x.dtype(), x.shape());
  const size_t bytes = size_t(x.numel()) * (x.dtype() == ingot::ext::kFloat32 ? 4 : 8);
  std::fill_n(static_cast<char*>(gx.raw()), bytes, 0);
  std::fill_n(static_cast<char*>(gy.raw()), bytes, 0);
  if (x.dtype() == ingot::ext::kFloat32)
    softshrink_grad(x.data<float>(), ddx.data<float>(), gdy.data<float>(), x.numel(), lambd);
  else
    softshrink_grad(x.data<double>(), ddx.data<double>(), gdy.data<double>(), x.numel(), lambd);
}

// RepeatRows: [N, ...] -> [N * repeats, ...], each row `repeats` times in a row.
void repeat_rows_shape(ingot::ext::ShapeContext& ctx) {
  ingot::ext::ValueType t = ctx.input(0);
  const int64_t repeats = ctx.attr_int("repeats");
  if (repeats < 1) throw std::invalid_argument("repeats must be >= 1");
  if (t.rank == 0) throw std::invalid_argument("RepeatRows needs an input of rank >= 1");
  if (t.rank > 0 && t.dims[0] >= 0) t.dims[0] *= repeats;
  ctx.set_output(0, t);
}

void repeat_rows_cpu(KernelContext& ctx) {
  const TensorRef x = ctx.input(0);
  const int64_t repeats = ctx.attr_int("repeats");
  if (x.rank() < 1) throw std::invalid_argument("RepeatRows needs an input of rank >= 1");
  if (repeats < 1) throw std::invalid_argument("repeats must be >= 1, got " + std::to_string(repeats));
  std::vector<int64_t> shape = x.shape();
  const int64_t rows = shape[0];
  shape[0] *= repeats;
  const TensorRef y = ctx.output(0, x.dtype(), shape);
  const size_t row_bytes = size_t(x.numel() / std::max<int64_t>(rows, 1)) * (x.dtype() == ingot::ext::kInt64 || x.dtype() == ingot::ext::kFloat64 ? 8 : 4);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < repeats; ++k)
      std::copy_n(static_cast<const char*>(x.raw()) + r * row_bytes, row_bytes,
                  static_cast<char*>(y.raw()) + (r * repeats + k) * row_bytes);
}

}  // namespace

INGOT_EXTENSION(registry) {
  using namespace ingot::ext;
  registry.op("test.ext", "Softshrink")
      .summary("max(|x| - lambd, 0) * sign(x)")
      .input("X", "T").output("Y", "T").type("T", {kFloat32, kFloat64})
      .attr("lambd", 0.5f)
      .cpu(softshrink_cpu)
      .gradient("SoftshrinkGrad");
  registry.op("test.ext", "SoftshrinkGrad")
      .input("X", "T").input("Y", "T").input("dY", "T").output("dX", "T").type("T", {kFloat32, kFloat64})
      .attr("lambd", 0.5f)
      .cpu(softshrink_grad_cpu)
      .gradient("SoftshrinkGradGrad");
  registry.op("test.ext", "SoftshrinkGradGrad")
      .input("X", "T").input("Y", "T").input("dY", "T").input("dX", "T").input("ddX", "T")
      .output("gX", "T").output("gY", "T").output("gdY", "T").type("T", {kFloat32, kFloat64})
      .attr("lambd", 0.5f)
      .cpu(softshrink_grad_grad_cpu);
  registry.op("test.ext", "RepeatRows")
      .input("X", "T").output("Y", "T").type("T", {kFloat32, kFloat64, kInt32, kInt64})
      .attr("repeats", int64_t(2))
      .shape(repeat_rows_shape)
      .cpu(repeat_rows_cpu);
}
