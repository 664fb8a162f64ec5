// Comparisons, logic, bitwise ops, BitShift and Where on the GPU (kernels: elementwise.cuh).
#include "backends/cuda/kernels/elementwise.cuh"

namespace ingot::cuda {
namespace {

template <class Op>
void compare(KernelContext& ctx) {
  binary_typed<bool, INGOT_CUDA_NUMERIC_TYPES, DType::Bool>(ctx, Op{}, DType::Bool);
}
template <class Op>
void logical(KernelContext& ctx) {
  binary_typed<bool, DType::Bool>(ctx, Op{}, DType::Bool);
}
template <class Op>
void bitwise(KernelContext& ctx) {
  binary_typed<void, INGOT_INT_TYPES>(ctx, Op{});
}

void bit_shift(KernelContext& ctx) {
  binary_typed<void, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64>(
      ctx, BitShiftOp{ctx.attr_string("direction") == "LEFT"});
}


// ---- Where ---------------------------------------------------------------------------------

void where(KernelContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& a = ctx.input(1);
  const Tensor& b = ctx.input(2);
  if (c.dtype() != DType::Bool) fail("input 0 (condition) must be bool, got {}", dtype_name(c.dtype()));
  if (a.dtype() != b.dtype()) {
    fail("input 2 (Y) has dtype {}, input 1 (X) has {}", dtype_name(b.dtype()), dtype_name(a.dtype()));
  }
  const Shape out_shape = broadcast_shapes({c.shape(), a.shape(), b.shape()});
  Tensor& y = ctx.allocate(0, a.dtype(), out_shape);
  const int64_t n = y.numel();
  if (n == 0) return;
  Indexer ic, ia, ib;
  make_indexers({&c.shape(), &a.shape(), &b.shape()}, out_shape, {&ic, &ia, &ib});
  dispatch_by_size(a.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, std::string>) {
      fail("string tensors live on the CPU only");
    } else {
      where_kernel<T><<<blocks_for(n), kThreads, 0, stream()>>>(ptr<const bool>(c), ptr<const T>(a), ptr<const T>(b),
                                                               ptr<T>(y), n, ic, ia, ib);
      INGOT_CUDA_LAUNCH_CHECK();
    }
  });
}

}  // namespace

INGOT_CUDA_KERNEL(Equal, compare<EqualOp>).versions(7).dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool});
INGOT_CUDA_KERNEL(Less, compare<LessOp>).versions(7).dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool});
INGOT_CUDA_KERNEL(LessOrEqual, compare<LessOrEqualOp>).versions(12).dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool});
INGOT_CUDA_KERNEL(Greater, compare<GreaterOp>).versions(7).dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool});
INGOT_CUDA_KERNEL(GreaterOrEqual, compare<GreaterOrEqualOp>)
    .versions(12)
    .dtypes({INGOT_CUDA_NUMERIC_TYPES, DType::Bool});
INGOT_CUDA_KERNEL(And, logical<AndOp>).versions(7).dtypes({DType::Bool});
INGOT_CUDA_KERNEL(Or, logical<OrOp>).versions(7).dtypes({DType::Bool});
INGOT_CUDA_KERNEL(Xor, logical<XorOp>).versions(7).dtypes({DType::Bool});
INGOT_CUDA_KERNEL(BitwiseAnd, bitwise<BitAndOp>).versions(18).dtypes({INGOT_INT_TYPES});
INGOT_CUDA_KERNEL(BitwiseOr, bitwise<BitOrOp>).versions(18).dtypes({INGOT_INT_TYPES});
INGOT_CUDA_KERNEL(BitwiseXor, bitwise<BitXorOp>).versions(18).dtypes({INGOT_INT_TYPES});
INGOT_CUDA_KERNEL(BitShift, bit_shift).versions(11).dtypes({DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64});
INGOT_CUDA_KERNEL(Where, where).versions(9).dtypes({DType::Bool});

}  // namespace ingot::cuda
