// Casts between the floating-point types on the GPU: the casts mixed precision puts at a model's
// inputs and outputs, in a module of their own so that a float16 package's first Cast loads ~0.3 MB
// of device code, not every dtype pair's (kernels: elementwise.cuh; Cast itself:
// elementwise_cast.cu).
#include "backends/cuda/kernels/elementwise.cuh"

namespace ingot::cuda {

void cast_between_floats(const Tensor& x, Tensor& y) {
  dispatch_device<INGOT_CUDA_FLOAT_TYPES>(x.dtype(), [&]<class S>() {
    dispatch_device<INGOT_CUDA_FLOAT_TYPES>(y.dtype(), [&]<class D>() {
      launch_map1(ptr<const S>(x), ptr<D>(y), x.numel(), CastOp<D, S>{});
    });
  });
}

}  // namespace ingot::cuda
