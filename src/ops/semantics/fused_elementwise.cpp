#include "ops/semantics/fused_elementwise.h"

#include <fmt/format.h>
#include <ingot/error.h>

#include <array>
#include <cstdlib>

#include "core/broadcast.h"
#include "ops/kernel.h"

namespace ingot::fused {
namespace {

struct OpInfo {
  Op op;
  std::string_view name;
  int arity;
};

constexpr std::array kOps = {
#define INGOT_UNARY(name) OpInfo{Op::name, #name, 1},
#define INGOT_BINARY(name) OpInfo{Op::name, #name, 2},
    INGOT_FUSED_UNARY_OPS(INGOT_UNARY) INGOT_FUSED_BINARY_OPS(INGOT_BINARY)
#undef INGOT_UNARY
#undef INGOT_BINARY
};

std::string operand_str(const Operand& o) {
  switch (o.kind) {
    case Operand::Kind::Input: return fmt::format("x{}", o.index);
    case Operand::Kind::Temp: return fmt::format("t{}", o.index);
    default: return fmt::format("{:.9g}", o.value);
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

int arity(Op op) { return kOps[size_t(op)].arity; }
std::string_view op_name(Op op) { return kOps[size_t(op)].name; }

bool op_from_name(std::string_view name, Op& op) {
  for (const OpInfo& info : kOps) {
    if (info.name == name) {
      op = info.op;
      return true;
    }
  }
  return false;
}

static std::string text(const std::vector<Instr>& instrs, bool constants) {
  auto word = [&](const Operand& o) { return constants || o.kind != Operand::Kind::Const ? operand_str(o) : "c"; };
  std::string s;
  for (size_t i = 0; i < instrs.size(); ++i) {
    const Instr& in = instrs[i];
    if (i) s += "; ";
    s += fmt::format("{}({}", op_name(in.op), word(in.a));
    if (arity(in.op) == 2) s += ", " + word(in.b);
    s += ")";
  }
  return s;
}

std::string Program::str() const { return text(instrs, true); }
std::string Program::structure() const { return text(instrs, false); }

Program Program::parse(std::string_view text, int num_inputs) {
  Program p;
  p.num_inputs = num_inputs;
  if (num_inputs < 1 || num_inputs > kMaxInputs)
    fail("FusedElementwise: {} inputs (expected 1 to {})", num_inputs, kMaxInputs);
  size_t index = 0;
  while (!text.empty()) {
    const size_t end = text.find(';');
    const std::string_view item = trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    auto bad = [&](const std::string& why) {
      fail("FusedElementwise program, instruction {} '{}': {}", index, item, why);
    };
    const size_t open = item.find('('), close = item.rfind(')');
    if (open == std::string_view::npos || close != item.size() - 1) bad("expected OP(a) or OP(a, b)");
    Instr instr;
    if (!op_from_name(trim(item.substr(0, open)), instr.op)) bad("unknown op");
    std::string_view args = item.substr(open + 1, close - open - 1);
    std::vector<std::string_view> parts;
    for (size_t comma; (comma = args.find(',')) != std::string_view::npos; args.remove_prefix(comma + 1))
      parts.push_back(trim(args.substr(0, comma)));
    parts.push_back(trim(args));
    if (int(parts.size()) != arity(instr.op)) bad(fmt::format("expected {} operand(s)", arity(instr.op)));
    for (size_t k = 0; k < parts.size(); ++k) {
      const std::string word(parts[k]);
      Operand o;
      if (!word.empty() && (word[0] == 'x' || word[0] == 't')) {
        char* stop = nullptr;
        const long v = std::strtol(word.c_str() + 1, &stop, 10);
        if (word.size() < 2 || *stop != '\0' || v < 0) bad("bad operand '" + word + "'");
        const bool input = word[0] == 'x';
        if (input && v >= num_inputs) bad(fmt::format("operand {} but the node has {} inputs", word, num_inputs));
        if (!input && v >= long(index)) bad("operand " + word + " is not an earlier instruction");
        o = input ? Operand::input(int(v)) : Operand::temp(int(v));
      } else {
        char* stop = nullptr;
        const float v = std::strtof(word.c_str(), &stop);
        if (word.empty() || *stop != '\0') bad("bad operand '" + word + "'");
        o = Operand::constant(v);
      }
      (k == 0 ? instr.a : instr.b) = o;
    }
    p.instrs.push_back(instr);
    if (++index > size_t(kMaxInstrs)) fail("FusedElementwise program: more than {} instructions", kMaxInstrs);
  }
  if (p.instrs.empty()) fail("FusedElementwise program: no instructions");
  return p;
}

uint64_t Program::digest() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : fmt::format("{}|{}", num_inputs, structure())) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool refresh(NodeProgram& cache, const KernelContext& ctx) {
  const int n = int(ctx.num_inputs());
  const std::string& text = ctx.attr_string("program");
  if (cache.text == text && cache.program.num_inputs == n) return false;
  cache.program = Program::parse(text, n);
  cache.text = text;
  return true;
}

CallInputs call_inputs(const KernelContext& ctx) {
  CallInputs c;
  c.dtype = ctx.input(0).dtype();
  for (size_t k = 0; k < ctx.num_inputs(); ++k) {
    const Tensor& x = ctx.input(k);
    if (x.dtype() != c.dtype)
      fail("input {}: dtype {} differs from input 0's {} (FusedElementwise inputs share one dtype)", k,
           dtype_name(x.dtype()), dtype_name(c.dtype));
    c.shapes.push_back(x.shape());
  }
  c.out_shape = broadcast_shapes(c.shapes);
  return c;
}

}  // namespace ingot::fused
