// CUDA C for one FusedElementwise program and element type: straight-line code over the device ops
// of kernels/fused_ops.cuh (whose text it embeds), one grid-stride loop, compiled by NVRTC.
#pragma once
#include <ingot/dtype.h>

#include <string>

#include "ops/semantics/fused_elementwise.h"

namespace ingot::cuda {

// 0 float32, 1 float16, 2 bfloat16: the element-type code of fused_ops.cuh's loads and stores.
int fused_dtype_code(DType dtype);

// The kernel's source; its one entry point is `extern "C" __global__ void <kernel>(IngotFusedArgs)`.
std::string fused_kernel_source(const fused::Program& program, DType dtype, const std::string& kernel);

}  // namespace ingot::cuda
