// Process-wide numeric modes that backends consult (like the thread count, they are not per
// session): whether float32 matrix products and convolutions may use TF32 tensor cores (10-bit
// mantissa inputs, float32 accumulation). Off by default: float32 means float32.
#pragma once

namespace ingot {

void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace ingot
