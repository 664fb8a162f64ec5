#include "core/math_mode.h"

#include <atomic>

namespace ingot {

namespace {
std::atomic<bool> g_allow_tf32{false};
}

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }

}  // namespace ingot
