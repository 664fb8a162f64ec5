// ai.ingot.FusedElementwise on the GPU. Each program structure gets a generated kernel
// (fused_codegen.cpp: straight-line CUDA C, compiled by NVRTC to a cubin for this GPU's arch),
// looked up first in the device-code store (core/tuning.h), where a package's precompiled cubins
// are put when it loads, so a package's run compiles nothing. Compiled here when missing (and kept
// in the store, which is how `ingot convert` collects them). Without a cubin and without NVRTC
// the node runs a generic interpreter kernel compiled into the library: the same device ops
// (fused_ops.cuh), one pass over memory, slower arithmetic.
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <mutex>

#include "backends/cuda/fused_codegen.h"
#include "backends/cuda/kernels/cuda_util.cuh"
#include "backends/cuda/kernels/fused_ops.cuh"
#include "backends/cuda/nvrtc.h"
#include "core/broadcast.h"
#include "core/tuning.h"
#include "profiler/hooks.h"
#include "ops/semantics/fused_elementwise.h"

namespace ingot::cuda {
namespace {

static_assert(INGOT_FUSED_MAX_INPUTS == fused::kMaxInputs && INGOT_FUSED_MAX_INSTRS == fused::kMaxInstrs &&
              INGOT_FUSED_MAX_RANK == kMaxRank);

// Bumped when generated code changes meaning (keys of cubins stored in packages).
constexpr int kCodegenVersion = 1;

// The program as the interpreter reads it (immediates are in IngotFusedArgs::consts).
struct InterpretedProgram {
  int count = 0;
  unsigned char op[fused::kMaxInstrs];
  unsigned char kind[fused::kMaxInstrs][2];  // fused::Operand::Kind
  unsigned char index[fused::kMaxInstrs][2];
};

__device__ __forceinline__ float apply_op(int op, float a, float b) {
  switch (op) {
#define INGOT_CASE(name) \
  case int(fused::Op::name): return ingot_fused_##name(a, b);
    INGOT_FUSED_UNARY_OPS(INGOT_CASE) INGOT_FUSED_BINARY_OPS(INGOT_CASE)
#undef INGOT_CASE
  }
  return 0.0f;
}

template <int D>
__global__ void fused_interpreter(const IngotFusedArgs a, const InterpretedProgram p) {
  for (int64_t i = thread_index(); i < a.n; i += grid_stride()) {
    float x[fused::kMaxInputs], t[fused::kMaxInstrs];
    for (int k = 0; k < a.num_inputs; ++k) x[k] = ingot_fused_load<D>(a.in[k], ingot_fused_offset(a, k, i));
    for (int j = 0; j < p.count; ++j) {
      float v[2];
      for (int s = 0; s < 2; ++s) {
        const int kind = p.kind[j][s], idx = p.index[j][s];
        v[s] = kind == int(fused::Operand::Kind::Input)  ? x[idx]
               : kind == int(fused::Operand::Kind::Temp) ? t[idx]
                                                         : a.consts[2 * j + s];
      }
      t[j] = apply_op(p.op[j], v[0], v[1]);
    }
    ingot_fused_store<D>(a.out, i, t[p.count - 1]);
  }
}

// Generated kernels by key, process-wide: nodes of one structure share one loaded library.
const void* load_cubin(const std::string& key, const std::string& cubin) {
  static std::mutex mu;
  static std::map<std::string, cudaKernel_t>* loaded = new std::map<std::string, cudaKernel_t>();
  std::lock_guard lock(mu);
  if (auto it = loaded->find(key); it != loaded->end()) return reinterpret_cast<const void*>(it->second);
  profiler::detail::PhaseScope phase("load generated kernel");
  cudaLibrary_t lib = nullptr;
  INGOT_CUDA_CHECK(cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t kernel = nullptr;
  INGOT_CUDA_CHECK(cudaLibraryGetKernel(&kernel, lib, "ingot_fused"));
  loaded->emplace(key, kernel);
  return reinterpret_cast<const void*>(kernel);
}

// The node's program and the kernel chosen for it (per node; the dtype is fixed once prepared).
struct FusedState {
  fused::NodeProgram node;
  DType dtype = DType::Undefined;
  const void* generated = nullptr;  // nullptr: the interpreter
  InterpretedProgram interpreted;
};

void choose_kernel(FusedState& s, DType dtype) {
  s.dtype = dtype;
  s.generated = nullptr;
  const std::string arch = arch_name();
  const std::string key =
      fmt::format("fused_elementwise.v{}.{:016x}.{}.{}", kCodegenVersion, s.node.program.digest(), dtype_name(dtype), arch);
  if (auto cubin = tuning::device_code().find(key)) {
    s.generated = load_cubin(key, *cubin);
    return;
  }
  std::string why;
  if (nvrtc::available(&why)) {
    const std::string source = fused_kernel_source(s.node.program, dtype, "ingot_fused");
    const std::string cubin = nvrtc::compile_cubin(source, fmt::format("fused_elementwise_{:016x}.cu", s.node.program.digest()), arch);
    tuning::device_code().put(key, cubin);
    s.generated = load_cubin(key, cubin);
    return;
  }
  static std::once_flag noted;
  std::call_once(noted, [&] {
    std::fprintf(stderr, "ingot: fused elementwise kernels run the generic interpreter (%s; convert the model with "
                         "`ingot convert --device cuda` where NVRTC is installed to precompile them)\n", why.c_str());
  });
  InterpretedProgram& p = s.interpreted;
  p.count = int(s.node.program.instrs.size());
  for (int j = 0; j < p.count; ++j) {
    const fused::Instr& in = s.node.program.instrs[size_t(j)];
    p.op[j] = static_cast<unsigned char>(in.op);
    const fused::Operand* ops[2] = {&in.a, &in.b};
    for (int k = 0; k < 2; ++k) {
      p.kind[j][k] = static_cast<unsigned char>(ops[k]->kind);
      p.index[j][k] = static_cast<unsigned char>(ops[k]->index);
    }
  }
}

void fused_elementwise(KernelContext& ctx) {
  auto& s = ctx.state<FusedState>();
  if (fused::refresh(s.node, ctx)) s.dtype = DType::Undefined;
  const int n_in = s.node.program.num_inputs;
  const fused::CallInputs call = fused::call_inputs(ctx);
  const DType dt = call.dtype;
  const Shape& out_shape = call.out_shape;
  std::vector<const Shape*> shape_ptrs;
  for (const Shape& sh : call.shapes) shape_ptrs.push_back(&sh);
  Tensor& y = ctx.allocate(0, dt, out_shape);
  if (y.numel() == 0) return;
  if (s.dtype != dt) choose_kernel(s, dt);

  IngotFusedArgs a{};
  a.n = y.numel();
  a.num_inputs = n_in;
  std::vector<Indexer> indexers(static_cast<size_t>(n_in));
  std::vector<Indexer*> indexer_ptrs;
  for (Indexer& ix : indexers) indexer_ptrs.push_back(&ix);
  make_indexers(shape_ptrs, out_shape, indexer_ptrs);
  a.rank = indexers[0].rank;
  for (int d = 0; d < a.rank; ++d) a.out_dims[d] = indexers[0].out_dims[d];
  for (int k = 0; k < n_in; ++k) {
    const Tensor& x = ctx.input(size_t(k));
    a.in[k] = x.raw_data();
    a.mode[k] = x.shape() == out_shape ? INGOT_FUSED_SAME : x.numel() == 1 ? INGOT_FUSED_SCALAR : INGOT_FUSED_BROADCAST;
    for (int d = 0; d < a.rank; ++d) a.strides[k][d] = indexers[size_t(k)].strides[d];
  }
  a.out = y.raw_data();
  for (size_t j = 0; j < s.node.program.instrs.size(); ++j) {
    const fused::Instr& in = s.node.program.instrs[j];
    a.consts[2 * j] = in.a.value;
    a.consts[2 * j + 1] = in.b.value;
  }
  const unsigned blocks = blocks_for(a.n);
  if (s.generated) {
    void* args[] = {&a};
    INGOT_CUDA_CHECK(cudaLaunchKernel(s.generated, dim3(blocks), dim3(kThreads), args, 0, stream()));
    return;
  }
  const int code = fused_dtype_code(dt);
  if (code == 0) fused_interpreter<0><<<blocks, kThreads, 0, stream()>>>(a, s.interpreted);
  if (code == 1) fused_interpreter<1><<<blocks, kThreads, 0, stream()>>>(a, s.interpreted);
  if (code == 2) fused_interpreter<2><<<blocks, kThreads, 0, stream()>>>(a, s.interpreted);
  INGOT_CUDA_LAUNCH_CHECK();
}

}  // namespace

INGOT_CUDA_KERNEL(FusedElementwise, fused_elementwise)
    .domain(kIngotDomain)
    .versions(1)
    .dtypes({DType::Float32, DType::Float16, DType::BFloat16});

}  // namespace ingot::cuda
