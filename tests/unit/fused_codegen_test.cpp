// The CUDA code generator for FusedElementwise (backends/cuda/fused_codegen.cpp) without a GPU:
// every op and element type generates a kernel that NVRTC compiles for sm_90 (NVRTC needs no
// device), and programs that differ only in constants share one kernel. The kernels' numbers are
// checked against the CPU on the GPU machine (tests/gpu/fused_test.cpp).
#ifdef INGOT_HAS_CUDA
#include <gtest/gtest.h>
#include <ingot/error.h>

#include "backends/cuda/fused_codegen.h"
#include "backends/cuda/nvrtc.h"
#include "ops/semantics/fused_elementwise.h"

namespace ingot {
namespace {

using fused::Program;

TEST(FusedCodegen, EveryOpAndDtypeCompilesWithNvrtc) {
  std::string why;
  if (!cuda::nvrtc::available(&why)) GTEST_SKIP() << why;
  // One program using every op once: unary ops on x0, binary ops mixing inputs, temps and constants.
  std::string text;
  int t = 0;
  auto add = [&](const std::string& instr) {
    text += (text.empty() ? "" : "; ") + instr;
    return "t" + std::to_string(t++);
  };
  std::string last = "x0";
#define INGOT_UNARY(name) last = add(std::string(#name) + "(" + last + ")");
#define INGOT_BINARY(name) last = add(std::string(#name) + "(" + last + ", x1)"), last = add(std::string(#name) + "(0.5, " + last + ")");
  INGOT_FUSED_UNARY_OPS(INGOT_UNARY)
  const Program unary = Program::parse(text, 2);
  text.clear(), t = 0, last = "x0";
  INGOT_FUSED_BINARY_OPS(INGOT_BINARY)
#undef INGOT_UNARY
#undef INGOT_BINARY
  const Program binary = Program::parse(text, 2);
  for (const Program* p : {&unary, &binary}) {
    for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16}) {
      const std::string source = cuda::fused_kernel_source(*p, dt, "ingot_fused");
      std::string cubin;
      ASSERT_NO_THROW(cubin = cuda::nvrtc::compile_cubin(source, "fused_test.cu", "sm_90")) << source;
      // An ELF image.
      ASSERT_GE(cubin.size(), 4u);
      EXPECT_EQ(cubin.substr(0, 4), "\x7f" "ELF");
    }
  }
}

TEST(FusedCodegen, ConstantsAreArgumentsSoStructuresShareKernels) {
  const Program a = Program::parse("Mul(x0, 0.25); Add(t0, 1e-30)", 1);
  const Program b = Program::parse("Mul(x0, -3); Add(t0, 7)", 1);
  const Program c = Program::parse("Mul(x0, 0.25); Sub(t0, 1e-30)", 1);
  EXPECT_EQ(a.structure(), b.structure());
  EXPECT_EQ(a.digest(), b.digest());
  EXPECT_NE(a.digest(), c.digest());
  EXPECT_EQ(cuda::fused_kernel_source(a, DType::Float32, "k"), cuda::fused_kernel_source(b, DType::Float32, "k"));
  EXPECT_NE(a.str(), b.str());
}

TEST(FusedCodegen, CompileErrorsCarryNvrtcsLog) {
  std::string why;
  if (!cuda::nvrtc::available(&why)) GTEST_SKIP() << why;
  try {
    cuda::nvrtc::compile_cubin("extern \"C\" __global__ void k() { undefined_name(); }", "broken.cu", "sm_90");
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken.cu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("undefined_name"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ingot
#endif
