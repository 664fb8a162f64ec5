// The interface between the CPU backend and its Gloo plugin (libingot_gloo.so, built from
// src/plugins/gloo/gloo_plugin.cpp against Debian's libgloo). The plugin is opened with dlopen only
// when a process joins a "gloo" group, so Gloo and what it links (libibverbs, hiredis, libnl) cost
// nothing to any other process. Plain virtual calls over bytes: the plugin links no libingot symbol.
// Errors are thrown as std::exception (same compiler and C++ library on both sides).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/collectives.h"

namespace ingot::cpu {

// One rank's full mesh of TCP connections on this host. Blocking calls; one thread at a time.
struct GlooGroup {
  virtual ~GlooGroup() = default;
  // `count` elements of ONNX dtype code `dtype` (float, double, float16, int8/16/32/64, uint8) in
  // place; op: ReduceOp::Sum, Max or Min (Avg is a Sum the caller divides).
  virtual void all_reduce(void* data, size_t count, int dtype, ReduceOp op) = 0;
  virtual void broadcast(void* data, size_t nbytes, int root) = 0;
  virtual void barrier() = 0;
};

// The plugin's one entry point, `ingot_gloo_connect`: meets the other ranks through `store` (keys
// under `prefix`) and connects to each. The caller owns the result.
using GlooConnect = GlooGroup* (*)(KeyValueStore* store, const char* prefix, int rank, int world_size,
                                    int64_t timeout_ms);
inline constexpr const char* kGlooConnectSymbol = "ingot_gloo_connect";
inline constexpr const char* kGlooPluginName = "libingot_gloo.so";

// The CPU backend's Communicator over the plugin (backends/cpu/gloo_collectives.cpp).
std::unique_ptr<Communicator> connect_gloo(const ConnectOptions& options);

}  // namespace ingot::cpu
