// NVRTC, CUDA's runtime compiler, opened on first use (dlopen): Ingot links no compiler, so a
// machine that only runs packages needs none; without it, callers fall back (the fused elementwise
// kernel to its interpreter).
#pragma once
#include <string>

namespace ingot::cuda::nvrtc {

// Whether NVRTC could be loaded (and INGOT_NO_NVRTC is not set); why not in `why`.
bool available(std::string* why = nullptr);

// "nvrtc 13.0" (part of generated-code keys: a different compiler makes different code).
std::string version();

// Compiles CUDA C++ `source` (named `name` in messages) to a cubin for `arch` ("sm_90"); throws
// with NVRTC's log on a compile error.
std::string compile_cubin(const std::string& source, const std::string& name, const std::string& arch);

}  // namespace ingot::cuda::nvrtc
