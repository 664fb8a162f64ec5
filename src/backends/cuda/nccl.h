// The CUDA backend's Communicator (core/collectives.h) over NCCL, opened with dlopen when a process
// joins an "nccl" group (backends/cuda/nccl.cpp).
#pragma once
#include <memory>

#include "core/collectives.h"

namespace ingot::cuda {

std::unique_ptr<Communicator> connect_nccl(const ConnectOptions& options);

}  // namespace ingot::cuda
