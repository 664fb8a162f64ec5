// libFuzzer target: random small valid models from the op catalogue. The input bytes choose an
// ai.onnx op Ingot implements, how many inputs it gets, each input's dtype among those ONNX's schema
// allows (one dtype per type variable), shape (rank 0-3, dims 0-4) and values (small integers,
// ordinary and extreme floats), and its attributes (present or not, values of the declared kind);
// the model is written as ONNX, loaded by a Session (import, passes, executor) and run. Each model
// must either compute or raise ingot::Error: a crash, a sanitizer report, another exception or a
// hang is a finding. Sessions run under a 256 MB memory limit and a 5 s time limit, so a model that
// asks for too much gets Ingot's clear error, which is what the target checks.
#include <fuzzer/FuzzedDataProvider.h>
#include <ingot/error.h>
#include <ingot/session.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "onnx/onnx_import.h"
#include "ops/op_def.h"

namespace {

constexpr int kOpset = 17;

const std::map<std::string, onnx::TensorProto::DataType>& onnx_types() {
  static const std::map<std::string, onnx::TensorProto::DataType> types = {
      {"tensor(float)", onnx::TensorProto::FLOAT},     {"tensor(double)", onnx::TensorProto::DOUBLE},
      {"tensor(float16)", onnx::TensorProto::FLOAT16}, {"tensor(bfloat16)", onnx::TensorProto::BFLOAT16},
      {"tensor(int8)", onnx::TensorProto::INT8},       {"tensor(int16)", onnx::TensorProto::INT16},
      {"tensor(int32)", onnx::TensorProto::INT32},     {"tensor(int64)", onnx::TensorProto::INT64},
      {"tensor(uint8)", onnx::TensorProto::UINT8},     {"tensor(uint16)", onnx::TensorProto::UINT16},
      {"tensor(uint32)", onnx::TensorProto::UINT32},   {"tensor(uint64)", onnx::TensorProto::UINT64},
      {"tensor(bool)", onnx::TensorProto::BOOL},       {"tensor(string)", onnx::TensorProto::STRING}};
  return types;
}

// The ai.onnx ops of the catalogue that take no subgraph (If, Loop and Scan bodies are left to the
// ONNX suites), with their schemas at kOpset.
struct Candidate {
  const ingot::OpDef* def;
  const onnx::OpSchema* schema;
};
const std::vector<Candidate>& candidates() {
  static const std::vector<Candidate> list = [] {
    std::vector<Candidate> out;
    for (const ingot::OpDef* def : ingot::OpCatalogue::instance().all()) {
      if (!def->domain.empty() || def->since_version > kOpset || def->until_version < kOpset) continue;
      if (std::any_of(def->attrs.begin(), def->attrs.end(), [](const ingot::AttrDef& a) {
            return a.kind == ingot::AttrKind::Graph || a.kind == ingot::AttrKind::Graphs;
          }))
        continue;
      const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(def->name, kOpset, "");
      if (schema) out.push_back({def, schema});
    }
    return out;
  }();
  return list;
}

void random_values(FuzzedDataProvider& fdp, onnx::TensorProto& t, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    switch (t.data_type()) {
      case onnx::TensorProto::FLOAT:
      case onnx::TensorProto::FLOAT16:
      case onnx::TensorProto::BFLOAT16:
      case onnx::TensorProto::DOUBLE: {
        static const double special[] = {0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 1e-8, 1e30, -1e30,
                                         std::numeric_limits<double>::infinity(),
                                         std::numeric_limits<double>::quiet_NaN()};
        const double v = fdp.ConsumeBool() ? special[fdp.ConsumeIntegralInRange<size_t>(0, 10)]
                                           : fdp.ConsumeFloatingPointInRange<double>(-4.0, 4.0);
        if (t.data_type() == onnx::TensorProto::DOUBLE) {
          t.add_double_data(v);
        } else if (t.data_type() == onnx::TensorProto::FLOAT) {
          t.add_float_data(float(v));
        } else {  // 16-bit floats travel as their bit patterns in int32_data
          t.add_int32_data(fdp.ConsumeIntegral<uint16_t>());
        }
        break;
      }
      case onnx::TensorProto::STRING: t.add_string_data(fdp.ConsumeRandomLengthString(8)); break;
      case onnx::TensorProto::INT64: t.add_int64_data(fdp.ConsumeIntegralInRange<int64_t>(-5, 10)); break;
      case onnx::TensorProto::UINT32:
      case onnx::TensorProto::UINT64: t.add_uint64_data(fdp.ConsumeIntegralInRange<uint64_t>(0, 10)); break;
      case onnx::TensorProto::BOOL: t.add_int32_data(fdp.ConsumeBool()); break;
      default: t.add_int32_data(fdp.ConsumeIntegralInRange<int32_t>(-5, 10)); break;
    }
  }
}

void random_attribute(FuzzedDataProvider& fdp, const ingot::AttrDef& a, onnx::AttributeProto& p) {
  static const char* strings[] = {"", "NOTSET", "SAME_UPPER", "VALID", "constant", "reflect", "edge", "linear",
                                  "nearest", "cubic", "asymmetric", "half_pixel", "round_prefer_floor", "tanh",
                                  "relu", "sigmoid", "forward", "reverse", "bidirectional", "DCR", "CRD", "ij,jk->ik"};
  p.set_name(a.name);
  auto small_int = [&] { return fdp.ConsumeIntegralInRange<int64_t>(-3, 6); };
  auto some_float = [&] { return fdp.ConsumeBool() ? float(small_int()) : fdp.ConsumeFloatingPointInRange<float>(-2, 2); };
  switch (a.kind) {
    case ingot::AttrKind::Int: p.set_type(onnx::AttributeProto::INT); p.set_i(small_int()); break;
    case ingot::AttrKind::Float: p.set_type(onnx::AttributeProto::FLOAT); p.set_f(some_float()); break;
    case ingot::AttrKind::String:
      p.set_type(onnx::AttributeProto::STRING);
      p.set_s(strings[fdp.ConsumeIntegralInRange<size_t>(0, std::size(strings) - 1)]);
      break;
    case ingot::AttrKind::Ints:
      p.set_type(onnx::AttributeProto::INTS);
      for (int i = fdp.ConsumeIntegralInRange(0, 4); i > 0; --i) p.add_ints(small_int());
      break;
    case ingot::AttrKind::Floats:
      p.set_type(onnx::AttributeProto::FLOATS);
      for (int i = fdp.ConsumeIntegralInRange(0, 4); i > 0; --i) p.add_floats(some_float());
      break;
    case ingot::AttrKind::Strings:
      p.set_type(onnx::AttributeProto::STRINGS);
      for (int i = fdp.ConsumeIntegralInRange(0, 3); i > 0; --i)
        p.add_strings(strings[fdp.ConsumeIntegralInRange<size_t>(0, std::size(strings) - 1)]);
      break;
    case ingot::AttrKind::Tensor: {
      p.set_type(onnx::AttributeProto::TENSOR);
      onnx::TensorProto* t = p.mutable_t();
      t->set_data_type(fdp.ConsumeBool() ? onnx::TensorProto::FLOAT : onnx::TensorProto::INT64);
      const int64_t n = fdp.ConsumeIntegralInRange<int64_t>(0, 4);
      if (fdp.ConsumeBool()) t->add_dims(n);
      random_values(fdp, *t, fdp.ConsumeBool() ? n : (t->dims_size() ? n : 1));
      break;
    }
    default: p.set_type(onnx::AttributeProto::INT); p.set_i(0); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ingot::set_host_memory_limit(256 << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ingot::fuzz::MemFile file;
  FuzzedDataProvider fdp(data, size);
  const auto& ops = candidates();
  const Candidate& op = ops[fdp.ConsumeIntegralInRange<size_t>(0, ops.size() - 1)];

  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("fuzz");
  onnx::NodeProto* node = g->add_node();
  node->set_op_type(op.def->name);
  node->set_name("op");

  // Inputs: each formal parameter once (an optional one maybe absent, a variadic one 1-3 times).
  std::map<std::string, onnx::TensorProto::DataType> bound;  // type variable -> dtype
  std::vector<onnx::TensorProto> feeds;
  int index = 0;
  for (const auto& formal : op.schema->inputs()) {
    int count = 1;
    if (formal.GetOption() == onnx::OpSchema::Optional) count = fdp.ConsumeBool() ? 1 : 0;
    if (formal.GetOption() == onnx::OpSchema::Variadic) count = fdp.ConsumeIntegralInRange(1, 3);
    if (count == 0) {
      if (fdp.ConsumeBool()) break;  // trailing optional inputs left out entirely
      node->add_input("");
      continue;
    }
    for (int c = 0; c < count; ++c) {
      onnx::TensorProto::DataType dtype;
      const std::string& type = formal.GetTypeStr();
      if (auto it = bound.find(type); it != bound.end()) {
        dtype = it->second;
      } else {
        std::vector<onnx::TensorProto::DataType> allowed;
        for (const onnx::DataType s : formal.GetTypes()) {  // a type variable's allowed types, or the one type
          auto known = onnx_types().find(*s);
          if (known != onnx_types().end()) allowed.push_back(known->second);
        }
        if (allowed.empty()) return 0;  // only types Ingot does not have (sequences, complex)
        dtype = allowed[fdp.ConsumeIntegralInRange<size_t>(0, allowed.size() - 1)];
        bound[type] = dtype;
      }
      const std::string name = "in" + std::to_string(index++);
      node->add_input(name);
      onnx::TensorProto t;
      t.set_name(name);
      t.set_data_type(dtype);
      int64_t n = 1;
      for (int r = fdp.ConsumeIntegralInRange(0, 3); r > 0; --r) {
        t.add_dims(fdp.ConsumeIntegralInRange<int64_t>(0, 4));
        n *= t.dims(t.dims_size() - 1);
      }
      random_values(fdp, t, n);
      // Half of the inputs are initializers (constant folding and shape-from-constant paths).
      if (fdp.ConsumeBool()) {
        *g->add_initializer() = t;
      } else {
        auto* vi = g->add_input();
        vi->set_name(name);
        auto* tt = vi->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(dtype);
        for (int64_t d : t.dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
        feeds.push_back(t);
      }
    }
  }
  const int outputs = std::max(1, std::min<int>(int(op.schema->outputs().size()), fdp.ConsumeIntegralInRange(1, 3)));
  for (int o = 0; o < outputs; ++o) {
    const std::string name = "out" + std::to_string(o);
    node->add_output(name);
    g->add_output()->set_name(name);
  }
  for (const ingot::AttrDef& a : op.def->attrs) {
    if (a.required || fdp.ConsumeBool()) random_attribute(fdp, a, *node->add_attribute());
  }

  // INGOT_FUZZ_PRINT=1: show the model (reproducing a finding: fuzz_graph CRASH_FILE).
  static const bool print = std::getenv("INGOT_FUZZ_PRINT") != nullptr;
  if (print) std::fprintf(stderr, "%s\n", model.DebugString().c_str());
  std::string bytes;
  if (!model.SerializeToString(&bytes)) return 0;
  const std::string& path = file.write(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  try {
    ingot::SessionOptions options;
    options.threads = 1;
    options.report_fallbacks = false;
    options.time_limit_s = 5;
    ingot::Session session = ingot::Session::load(path, options);
    std::vector<ingot::Tensor> inputs;
    for (const onnx::TensorProto& t : feeds) {
      // The values travel through a one-tensor file, as ONNX test data does.
      std::string tb;
      t.SerializeToString(&tb);
      static ingot::fuzz::MemFile tensor_file;
      inputs.push_back(ingot::load_tensor_pb(tensor_file.write(reinterpret_cast<const uint8_t*>(tb.data()), tb.size())));
    }
    session.run(inputs);
  } catch (const ingot::Error&) {
  }
  return 0;
}
