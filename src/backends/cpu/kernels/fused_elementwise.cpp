// ai.ingot.FusedElementwise on the CPU: the program (ops/semantics/fused_elementwise.h) runs over
// chunks of kHalfChunk output elements, one plain loop per instruction into a float32 scratch row
// that stays in L1, so each loop vectorizes and the chain reads its inputs and writes its output
// once. Each op's formula is the unfused CPU kernel's (same helpers), so float32 results match the
// unfused graph; 16-bit tensors keep float32 between the ops instead of rounding after each.
#include "backends/cpu/kernels/elementwise.h"
#include "ops/semantics/fused_elementwise.h"

namespace ingot::cpu {
namespace {

using fused::Op;
using fused::Operand;
using fused::Program;

template <Op O>
inline float eval(float a, float b) {
  if constexpr (O == Op::Neg) return -a;
  if constexpr (O == Op::Abs) return std::fabs(a);
  if constexpr (O == Op::Exp) return exp_of(a);
  if constexpr (O == Op::Log) return std::log(a);
  if constexpr (O == Op::Sqrt) return std::sqrt(a);
  if constexpr (O == Op::Reciprocal) return 1.0f / a;
  if constexpr (O == Op::Sigmoid) return 1.0f / (1.0f + exp_of(-a));
  if constexpr (O == Op::Tanh) return tanh_of(a);
  if constexpr (O == Op::Relu) return a < 0 ? 0.0f : a;
  if constexpr (O == Op::Erf) return std::erf(a);
  if constexpr (O == Op::Floor) return std::floor(a);
  if constexpr (O == Op::Ceil) return std::ceil(a);
  if constexpr (O == Op::Sin) return std::sin(a);
  if constexpr (O == Op::Cos) return std::cos(a);
  if constexpr (O == Op::Softplus) return softplus_of(a);
  if constexpr (O == Op::HardSwish) return a * std::min(std::max(a * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
  if constexpr (O == Op::Add) return a + b;
  if constexpr (O == Op::Sub) return a - b;
  if constexpr (O == Op::Mul) return a * b;
  if constexpr (O == Op::Div) return a / b;
  if constexpr (O == Op::Pow) return std::pow(a, b);
  if constexpr (O == Op::Max) return (a > b || is_nan(a)) ? a : b;
  if constexpr (O == Op::Min) return (a < b || is_nan(a)) ? a : b;
  if constexpr (O == Op::LeakyRelu) return a < 0 ? b * a : a;
}

// An operand over one chunk: n floats at p, or the value v everywhere (p == nullptr).
struct Span {
  const float* p = nullptr;
  float v = 0;
};

template <Op O>
void run(Span a, Span b, float* out, int64_t n) {
  if constexpr (O == Op::HardSwish) {
    // The one-loop form stays scalar (GCC 12): 20x slower on PP-OCR det's HardSwish after its int8
    // convolutions.
    if (a.p) {
      hard_swish_f32(a.p, out, n);
      return;
    }
  }
  if (a.p && b.p) {
    for (int64_t j = 0; j < n; ++j) out[j] = eval<O>(a.p[j], b.p[j]);
  } else if (a.p) {
    const float bv = b.v;
    for (int64_t j = 0; j < n; ++j) out[j] = eval<O>(a.p[j], bv);
  } else if (b.p) {
    const float av = a.v;
    for (int64_t j = 0; j < n; ++j) out[j] = eval<O>(av, b.p[j]);
  } else {
    std::fill_n(out, n, eval<O>(a.v, b.v));
  }
}

void run_instr(Op op, Span a, Span b, float* out, int64_t n) {
  switch (op) {
#define INGOT_CASE(name)                    \
  case Op::name:                            \
    run<Op::name>(a, b, out, n);            \
    break;
    INGOT_FUSED_UNARY_OPS(INGOT_CASE) INGOT_FUSED_BINARY_OPS(INGOT_CASE)
#undef INGOT_CASE
  }
}

void fused_elementwise(KernelContext& ctx) {
  auto& node = ctx.state<fused::NodeProgram>();
  fused::refresh(node, ctx);
  const Program& prog = node.program;
  const int n_in = prog.num_inputs;
  const fused::CallInputs call = fused::call_inputs(ctx);
  const DType dt = call.dtype;
  const std::vector<Shape>& shapes = call.shapes;
  const Shape& out_shape = call.out_shape;
  dispatch<DType::Float32, DType::Float16, DType::BFloat16>(dt, [&]<class T>() {
    Tensor& y = ctx.allocate(0, dt, out_shape);
    const int64_t numel = y.numel();
    if (numel == 0) return;
    const T* data[fused::kMaxInputs];
    for (int k = 0; k < n_in; ++k) data[k] = ctx.input(size_t(k)).template data<T>();
    T* out = y.data<T>();
    const BroadcastIterator it(out_shape, shapes);
    const int64_t inner = it.inner();
    const size_t last = prog.instrs.size() - 1;
    parallel_for(numel, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      float temps[fused::kMaxInstrs][kHalfChunk];
      float loaded[fused::kMaxInputs][kHalfChunk];
      int64_t offsets[fused::kMaxInputs];
      Span in[fused::kMaxInputs];
      Span results[fused::kMaxInstrs];  // each instruction's value over the chunk (or one value)
      for (int64_t pos = begin; pos < end;) {
        const int64_t row = pos / inner, col = pos % inner;
        const int64_t len = std::min({inner - col, end - pos, kHalfChunk});
        it.offsets(row, offsets);
        for (int k = 0; k < n_in; ++k) {
          const T* p = data[k] + offsets[k] + col * it.inner_stride(size_t(k));
          if (it.inner_stride(size_t(k)) == 0) {
            in[k] = Span{nullptr, float(compute_t<T>(p[0]))};
          } else if constexpr (std::is_same_v<T, float>) {
            in[k] = Span{p, 0};
          } else {
            load_compute(p, loaded[k], len);
            in[k] = Span{loaded[k], 0};
          }
        }
        auto operand = [&](const Operand& o) {
          switch (o.kind) {
            case Operand::Kind::Input: return in[o.index];
            case Operand::Kind::Temp: return results[o.index];
            default: return Span{nullptr, o.value};
          }
        };
        for (size_t i = 0; i < prog.instrs.size(); ++i) {
          const fused::Instr& instr = prog.instrs[i];
          const Span a = operand(instr.a), b = operand(instr.b);
          if (!a.p && !b.p) {
            // Only broadcast operands (a per-channel gate computed from a pooled value): once, not
            // per element.
            float v = 0;
            run_instr(instr.op, a, b, &v, 1);
            results[i] = Span{nullptr, v};
            if (i != last) continue;
          }
          float* dst = temps[i];
          if constexpr (std::is_same_v<T, float>) {
            if (i == last) dst = out + pos;  // the last instruction writes the output directly
          }
          if (results[i].p == nullptr && i == last && !a.p && !b.p) {
            std::fill_n(dst, len, results[i].v);
          } else {
            run_instr(instr.op, a, b, dst, len);
          }
          results[i] = Span{dst, 0};
        }
        if constexpr (!std::is_same_v<T, float>) store_result(results[last].p, out + pos, len);
        pos += len;
      }
    });
  });
}

}  // namespace

INGOT_CPU_KERNEL(FusedElementwise, fused_elementwise)
    .domain(kIngotDomain)
    .versions(1)
    .dtypes({DType::Float32, DType::Float16, DType::BFloat16});

}  // namespace ingot::cpu
