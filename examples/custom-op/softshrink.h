// The CUDA kernels of softshrink.cu, registered by softshrink.cpp.
#pragma once
#include <ingot/extension.h>

void softshrink_cuda(ingot::ext::KernelContext& ctx);
void softshrink_grad_cuda(ingot::ext::KernelContext& ctx);
