// Int8 products on CPUs without a VNNI dot product (qconv_int16.cpp): channels-last convolutions and
// matrix products as int16 multiply-adds (vpmaddwd), exact in int32, with the requantization in
// float32 vectors as oneDNN's.
#pragma once
#include <cstdint>
#include <memory>

#include "ops/semantics/quantized_args.h"

namespace ingot::cpu {

// Weights packed for one node (built once per constant W, kept in the node's state).
class Int16Product {
 public:
  virtual ~Int16Product() = default;
  // Whether this packing is of `a`'s weights (the same tensor, zero points and shape).
  virtual bool packs(const sem::QuantizedProductArgs& a) const = 0;
};

// How many products the int16 kernels have computed (tests: which path ran).
int64_t int16_product_calls();

// Whether the int16 kernels run int8 products here: INGOT_CPU_INT8_INT16 (-1: on CPUs where
// oneDNN's int8 kernels are not exact, i.e. without a VNNI dot product; 1 everywhere; 0 never).
bool int16_products_wanted(bool onednn_exact);

// QuantizedConv / QLinearConv into `y` (allocated) when the layer is one these kernels take: channels
// last, two spatial axes, one group or depthwise (one input and one output channel per group).
// `packed` is the node's cached packing (rebuilt when it is not of a's weights); false otherwise.
bool int16_conv(const sem::QConvGeometry& g, const sem::QuantizedProductArgs& a, std::shared_ptr<Int16Product>& packed,
                Tensor& y);

// QuantizedMatMul / QLinearMatMul: A [m, k] (rows flattened) times a 2-D W [k, n], into y [m, n].
void int16_matmul(const sem::QuantizedProductArgs& a, int64_t m, int64_t k, int64_t n,
                  std::shared_ptr<Int16Product>& packed, Tensor& y);

}  // namespace ingot::cpu
