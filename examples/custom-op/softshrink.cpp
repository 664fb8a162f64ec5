// Step 1 and 2 of the custom-op story (docs/CUSTOM_OPS.md): the kernel source and its bindings.
//
// example.custom::Softshrink(X) = X - lambd where X > lambd, X + lambd where X < -lambd, else 0
// (torch.nn.Softshrink), with its gradient op, on the CPU here and on CUDA in softshrink.cu (built
// in when WITH_CUDA is defined: run.py passes -DWITH_CUDA when it compiles the .cu too).
#include <ingot/extension.h>

#include <cmath>
#include <stdexcept>

#include "softshrink.h"

namespace {

using ingot::ext::KernelContext;
using ingot::ext::TensorRef;

float lambd_of(const KernelContext& ctx) {
  const float lambd = ctx.attr_float("lambd");
  if (!(lambd >= 0)) throw std::invalid_argument("lambd must be >= 0, got " + std::to_string(lambd));
  return lambd;
}

void softshrink_cpu(KernelContext& ctx) {
  const TensorRef x = ctx.input(0);
  const TensorRef y = ctx.output(0, x.dtype(), x.shape());
  const float l = lambd_of(ctx);
  const float* in = x.data<float>();
  float* out = y.data<float>();
  ctx.parallel_for(x.numel(), 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = in[i] > l ? in[i] - l : in[i] < -l ? in[i] + l : 0.0f;
  });
}

// Inputs X, Y, dY; output dX = dY where |X| > lambd.
void softshrink_grad_cpu(KernelContext& ctx) {
  const TensorRef x = ctx.input(0), dy = ctx.input(2);
  const TensorRef dx = ctx.output(0, x.dtype(), x.shape());
  const float l = lambd_of(ctx);
  const float *in = x.data<float>(), *g = dy.data<float>();
  float* out = dx.data<float>();
  ctx.parallel_for(x.numel(), 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = std::fabs(in[i]) > l ? g[i] : 0.0f;
  });
}

}  // namespace

INGOT_EXTENSION(registry) {
  using namespace ingot::ext;
  auto& forward = registry.op("example.custom", "Softshrink")
                      .summary("torch.nn.Softshrink: x - lambd if x > lambd, x + lambd if x < -lambd, else 0")
                      .input("X", "T").output("Y", "T").type("T", {kFloat32})
                      .attr("lambd", 0.5f)
                      .cpu(softshrink_cpu)
                      .gradient("SoftshrinkGrad");
  auto& backward = registry.op("example.custom", "SoftshrinkGrad")
                       .input("X", "T").input("Y", "T").input("dY", "T").output("dX", "T").type("T", {kFloat32})
                       .attr("lambd", 0.5f)
                       .cpu(softshrink_grad_cpu);
#ifdef WITH_CUDA
  forward.cuda(softshrink_cuda);
  backward.cuda(softshrink_grad_cuda);
#else
  (void)forward, (void)backward;
#endif
}
