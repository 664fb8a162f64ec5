// vmap's internals that tests look at (the transform itself is include/ingot/autograd.h's vmap).
#pragma once
#include <cstddef>

namespace ingot::autograd::detail {

// Nodes vmap has run once per batch element (no batching rule for their case), since the process began.
size_t vmap_loop_nodes();

}  // namespace ingot::autograd::detail
