// The program of an ai.ingot.FusedElementwise node: a straight-line chain of elementwise float ops
// that the fuse-elementwise pass (src/passes/fuse_elementwise.cpp) cut out of a graph. One kernel
// evaluates it per output element, so the chain reads its inputs once and writes one output instead
// of a tensor per op.
//
// Text form (the node's `program` attribute; what --dump-after shows), one instruction per `;`:
//   Div(x0, 1.41421354); Erf(t0); Add(t1, 1); Mul(x0, t2); Mul(t3, 0.5)
// xK is the node's K-th input, tK the result of instruction K, a number a float32 immediate (printed
// with 9 significant digits so it reads back bit-exact). The last instruction is the output. All
// arithmetic is in float32 whatever the tensors' dtype (float32, float16 or bfloat16); the inputs
// broadcast numpy-style to the output's shape.
//
// Used by the pass (building), the CPU kernel (a chunked vectorized loop per instruction), the CUDA
// kernel (an interpreter compiled into the library) and the CUDA code generator (straight-line CUDA
// C compiled with NVRTC), so the op set and its semantics live here once.
#pragma once
#include <ingot/tensor.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ingot {
class KernelContext;
}

namespace ingot::fused {

// Each op's float32 meaning is the ONNX op of the same name (Max/Min propagate NaN like ONNX's);
// LeakyRelu's second operand is alpha.
#define INGOT_FUSED_UNARY_OPS(X) \
  X(Neg) X(Abs) X(Exp) X(Log) X(Sqrt) X(Reciprocal) X(Sigmoid) X(Tanh) X(Relu) X(Erf) X(Floor) X(Ceil) X(Sin) X(Cos) \
      X(Softplus) X(HardSwish)
#define INGOT_FUSED_BINARY_OPS(X) X(Add) X(Sub) X(Mul) X(Div) X(Pow) X(Max) X(Min) X(LeakyRelu)

enum class Op : uint8_t {
#define INGOT_ENUM(name) name,
  INGOT_FUSED_UNARY_OPS(INGOT_ENUM) INGOT_FUSED_BINARY_OPS(INGOT_ENUM)
#undef INGOT_ENUM
};

int arity(Op op);
std::string_view op_name(Op op);
bool op_from_name(std::string_view name, Op& op);

struct Operand {
  enum class Kind : uint8_t { Input, Temp, Const };
  Kind kind = Kind::Const;
  int32_t index = 0;  // Input: the node's input; Temp: an earlier instruction
  float value = 0;    // Const

  static Operand input(int i) { return {Kind::Input, i, 0}; }
  static Operand temp(int i) { return {Kind::Temp, i, 0}; }
  static Operand constant(float v) { return {Kind::Const, 0, v}; }
};

struct Instr {
  Op op{};
  Operand a, b;  // b unused by unary ops
};

// Limits the kernels size their tables by (also what the pass stops growing a chain at).
inline constexpr int kMaxInputs = 8;
inline constexpr int kMaxInstrs = 32;

struct Program {
  std::vector<Instr> instrs;
  int num_inputs = 0;

  std::string str() const;
  // Parses the text form; throws naming the offending instruction when it is malformed, refers to
  // an input >= num_inputs or a later instruction, or exceeds the limits.
  static Program parse(std::string_view text, int num_inputs);
  // The text form with every immediate written as `c`: programs that differ only in their
  // constants share a generated kernel (which reads the constants from its arguments).
  std::string structure() const;
  // A stable 64-bit digest of structure() and num_inputs (keys generated kernels).
  uint64_t digest() const;
};

// What the CPU and CUDA kernels check and derive per call.
// A node's program, parsed once (kernel state) and again only if the attribute changes.
struct NodeProgram {
  std::string text;
  Program program;
};
// Brings `cache` up to date with the node's `program` attribute; true when it parsed now.
bool refresh(NodeProgram& cache, const KernelContext& ctx);

// The inputs' common dtype (an input of another dtype is an error naming it), their shapes and the
// broadcast output shape.
struct CallInputs {
  DType dtype = DType::Undefined;
  std::vector<Shape> shapes;
  Shape out_shape;
};
CallInputs call_inputs(const KernelContext& ctx);

}  // namespace ingot::fused
