#include "onnx/onnx_import.h"

// onnx_pb.h defines ONNX_API, which onnx-data.pb.h needs: keep it first.
// clang-format off
#include <onnx/onnx_pb.h>
#include <onnx/onnx-data.pb.h>
// clang-format on
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include "core/isolated.h"
#include "onnx/onnx_normalize.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_set>

namespace ingot {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail("{} '{}' does not exist", what, path);
  if (fs::is_directory(path, ec)) fail("{} '{}' is a directory, not a file", what, path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {} '{}'", what, path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

DType dtype_from_onnx(int32_t t, std::string_view where) {
  switch (t) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::STRING:
    case onnx::TensorProto::BOOL:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT64:
    case onnx::TensorProto::BFLOAT16: return DType(t);
    default:
      fail("{}: ONNX element type {} ({}) is not supported", where, t,
           onnx::TensorProto::DataType_IsValid(t) ? onnx::TensorProto::DataType_Name(onnx::TensorProto::DataType(t))
                                                  : "invalid");
  }
}

class Importer {
 public:
  explicit Importer(std::string base_dir) : base_dir_(std::move(base_dir)) {}

  Tensor tensor(const onnx::TensorProto& p) {
    std::string where = "tensor '" + p.name() + "'";
    if (p.has_segment()) fail("{}: segmented tensors are not supported", where);
    DType dt = dtype_from_onnx(p.data_type(), where);
    Shape shape(p.dims().begin(), p.dims().end());
    int64_t n = 1;
    for (int64_t d : shape) {
      if (d < 0) fail("{}: negative dimension in {}", where, shape_str(shape));
      if (d && n > INT64_MAX / d / 64) fail("{}: shape {} is too large", where, shape_str(shape));
      n *= d;
    }
    auto expect_count = [&](int64_t got) {
      if (got != n) fail("{}: holds {} values but its shape {} needs {}", where, got, shape_str(shape), n);
    };
    // The data must be there before anything is allocated: a few bytes of file may declare any shape.
    const int64_t nbytes = n * int64_t(dtype_size(dt));
    if (dt == DType::String) {
      expect_count(p.string_data_size());
    } else if (p.data_location() == onnx::TensorProto::EXTERNAL) {
      // read_external checks the file's size
    } else if (p.has_raw_data()) {
      if (int64_t(p.raw_data().size()) != nbytes) {
        fail("{}: raw_data has {} bytes but {}{} needs {}", where, p.raw_data().size(), dtype_name(dt), shape_str(shape),
             nbytes);
      }
    } else {
      expect_count(typed_count(p, dt, where));
    }
    Tensor t = dt == DType::String || p.data_location() != onnx::TensorProto::EXTERNAL
                   ? Tensor::empty(dt, shape)
                   : Tensor();
    if (dt == DType::String) {
      std::string* out = t.data<std::string>();
      for (int64_t i = 0; i < n; ++i) out[i] = p.string_data(int(i));
      return t;
    }
    if (p.data_location() == onnx::TensorProto::EXTERNAL) return read_external(p, dt, shape, where);
    if (p.has_raw_data()) {
      if (n) std::memcpy(t.raw_data(), p.raw_data().data(), t.nbytes());
      return t;
    }
    auto copy_from = [&](const auto& field, auto convert) {
      for (int64_t i = 0; i < n; ++i) convert(i, field[int(i)]);
    };
    switch (dt) {
      case DType::Float32: copy_from(p.float_data(), [&](int64_t i, float v) { t.data<float>()[i] = v; }); break;
      case DType::Float64: copy_from(p.double_data(), [&](int64_t i, double v) { t.data<double>()[i] = v; }); break;
      case DType::Int64: copy_from(p.int64_data(), [&](int64_t i, int64_t v) { t.data<int64_t>()[i] = v; }); break;
      case DType::UInt32:
        copy_from(p.uint64_data(), [&](int64_t i, uint64_t v) { t.data<uint32_t>()[i] = uint32_t(v); });
        break;
      case DType::UInt64: copy_from(p.uint64_data(), [&](int64_t i, uint64_t v) { t.data<uint64_t>()[i] = v; }); break;
      case DType::Float16:
      case DType::BFloat16:
      case DType::Int16:
      case DType::UInt16:
        copy_from(p.int32_data(), [&](int64_t i, int32_t v) { static_cast<uint16_t*>(t.raw_data())[i] = uint16_t(v); });
        break;
      case DType::Int8:
      case DType::UInt8:
      case DType::Bool:
        copy_from(p.int32_data(), [&](int64_t i, int32_t v) { static_cast<uint8_t*>(t.raw_data())[i] = uint8_t(v); });
        break;
      case DType::Int32: copy_from(p.int32_data(), [&](int64_t i, int32_t v) { t.data<int32_t>()[i] = v; }); break;
      default: fail("{}: unsupported dtype {}", where, dtype_name(dt));
    }
    return t;
  }

  ValueType type(const onnx::TypeProto& tp, std::string_view where) {
    ValueType vt;
    const onnx::TypeProto* elem = &tp;
    if (tp.has_sequence_type()) {
      vt.kind = ValueKind::Sequence;
      elem = &tp.sequence_type().elem_type();
    } else if (tp.has_optional_type()) {
      vt.kind = ValueKind::Optional;
      elem = &tp.optional_type().elem_type();
      if (elem->has_sequence_type()) elem = &elem->sequence_type().elem_type();
    }
    if (!elem->has_tensor_type()) return vt;  // unknown element type: left undefined
    const auto& tt = elem->tensor_type();
    if (tt.elem_type() != 0) vt.dtype = dtype_from_onnx(tt.elem_type(), where);
    if (tt.has_shape()) {
      std::vector<Dim> dims;
      for (const auto& d : tt.shape().dim()) {
        Dim dim;
        if (d.has_dim_value())
          dim.value = d.dim_value();
        else if (d.has_dim_param())
          dim.symbol = d.dim_param();
        dims.push_back(std::move(dim));
      }
      vt.shape = std::move(dims);
    }
    return vt;
  }

  std::shared_ptr<Graph> graph(const onnx::GraphProto& gp) {
    auto g = std::make_shared<Graph>();
    g->name = gp.name();
    for (const auto& init : gp.initializer()) g->initializers[init.name()] = tensor(init);
    if (gp.sparse_initializer_size()) fail("graph '{}': sparse initializers are not supported", gp.name());
    for (const auto& in : gp.input()) {
      if (g->initializers.count(in.name())) continue;  // an initializer listed as an overridable input
      g->inputs.push_back({in.name(), type(in.type(), "input '" + in.name() + "'")});
    }
    for (const auto& out : gp.output())
      g->outputs.push_back({out.name(), type(out.type(), "output '" + out.name() + "'")});
    for (const auto& vi : gp.value_info())
      g->value_info[vi.name()] = {vi.name(), type(vi.type(), "value '" + vi.name() + "'")};
    int index = 0;
    for (const auto& np : gp.node()) {
      Node n;
      n.name = unique_node_name(np.name().empty() ? fmt::format("{}_{}", np.op_type(), index) : np.name());
      n.op_type = np.op_type();
      n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
      n.inputs.assign(np.input().begin(), np.input().end());
      n.outputs.assign(np.output().begin(), np.output().end());
      try {
        for (const auto& ap : np.attribute()) n.attrs[ap.name()] = attribute(ap);
      } catch (Error& e) {
        e.add_context(n.label());
        throw;
      }
      g->nodes.push_back(std::move(n));
      ++index;
    }
    return g;
  }

 private:
  // How many values the typed field a dtype is stored in holds.
  static int64_t typed_count(const onnx::TensorProto& p, DType dt, const std::string& where) {
    switch (dt) {
      case DType::Float32: return p.float_data_size();
      case DType::Float64: return p.double_data_size();
      case DType::Int64: return p.int64_data_size();
      case DType::UInt32:
      case DType::UInt64: return p.uint64_data_size();
      case DType::Float16:
      case DType::BFloat16:
      case DType::Int16:
      case DType::UInt16:
      case DType::Int8:
      case DType::UInt8:
      case DType::Bool:
      case DType::Int32: return p.int32_data_size();
      default: fail("{}: unsupported dtype {}", where, dtype_name(dt));
    }
  }

  // Node names as written, made unique across the model (converters leave them empty or repeat
  // them; profiles, placement reports and --keep-float name nodes): a repeat gets "~2", "~3", ...
  std::string unique_node_name(const std::string& name) {
    if (node_names_.insert(name).second) return name;
    for (int k = 2;; ++k) {
      std::string candidate = fmt::format("{}~{}", name, k);
      if (node_names_.insert(candidate).second) return candidate;
    }
  }

  Attribute attribute(const onnx::AttributeProto& ap) {
    if (!ap.ref_attr_name().empty())
      fail("attribute '{}' refers to a function attribute, which is not supported", ap.name());
    Attribute a;
    switch (ap.type()) {
      case onnx::AttributeProto::INT: return Attribute(int64_t(ap.i()));
      case onnx::AttributeProto::FLOAT: return Attribute(ap.f());
      case onnx::AttributeProto::STRING: return Attribute(ap.s());
      case onnx::AttributeProto::TENSOR: return Attribute(tensor(ap.t()));
      case onnx::AttributeProto::GRAPH: return Attribute::graph(graph(ap.g()));
      case onnx::AttributeProto::INTS: return Attribute(std::vector<int64_t>(ap.ints().begin(), ap.ints().end()));
      case onnx::AttributeProto::FLOATS: return Attribute(std::vector<float>(ap.floats().begin(), ap.floats().end()));
      case onnx::AttributeProto::STRINGS:
        return Attribute(std::vector<std::string>(ap.strings().begin(), ap.strings().end()));
      case onnx::AttributeProto::TENSORS:
        a.kind = AttrKind::Tensors;
        for (const auto& t : ap.tensors()) a.tensors.push_back(tensor(t));
        return a;
      case onnx::AttributeProto::GRAPHS:
        a.kind = AttrKind::Graphs;
        for (const auto& g : ap.graphs()) a.graphs.push_back(graph(g));
        return a;
      case onnx::AttributeProto::TYPE_PROTO:  // e.g. Optional's `type`: kept as readable text
        return Attribute(ap.tp().ShortDebugString());
      case onnx::AttributeProto::TYPE_PROTOS:
        a.kind = AttrKind::Strings;
        for (const auto& tp : ap.type_protos()) a.strings.push_back(tp.ShortDebugString());
        return a;
      default: fail("attribute '{}' has unsupported type {}", ap.name(), int(ap.type()));
    }
  }

  Tensor read_external(const onnx::TensorProto& p, DType dtype, const Shape& shape, const std::string& where) {
    std::string location;
    int64_t offset = 0, length = -1;
    auto number = [&](const std::string& key, const std::string& text) {
      int64_t v = -1;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size() || v < 0)
        fail("{}: external data {} '{}' is not a byte count", where, key, text);
      return v;
    };
    for (const auto& kv : p.external_data()) {
      if (kv.key() == "location")
        location = kv.value();
      else if (kv.key() == "offset")
        offset = number("offset", kv.value());
      else if (kv.key() == "length")
        length = number("length", kv.value());
    }
    if (location.empty()) fail("{}: external data has no location", where);
    // Relative to the model's folder, and inside it: a downloaded model must not read other files
    // (an absolute path, "..", or a symbolic link out of the folder is refused, as onnxruntime does).
    std::error_code ec;
    const fs::path base = fs::weakly_canonical(fs::absolute(base_dir_.empty() ? "." : base_dir_), ec);
    const fs::path file = fs::weakly_canonical(base / location, ec);
    const fs::path inside = file.lexically_relative(base);
    if (fs::path(location).is_absolute() || ec || inside.empty() || *inside.begin() == "..")
      fail("{}: external data location '{}' is outside the model's folder '{}' (refused)", where, location, base.string());
    std::ifstream in(file, std::ios::binary);
    if (!in) fail("{}: cannot open external data file '{}'", where, file.string());
    const int64_t nbytes = shape_numel(shape) * int64_t(dtype_size(dtype));
    if (length >= 0 && length != nbytes) {
      fail("{}: external data length {} does not match {}{} ({} bytes)", where, length, dtype_name(dtype),
           shape_str(shape), nbytes);
    }
    const auto file_bytes = fs::file_size(file, ec);
    if (ec || offset > int64_t(file_bytes) || nbytes > int64_t(file_bytes) - offset) {
      fail("{}: external data file '{}' is too short (offset {}, {} bytes needed)", where, file.string(), offset, nbytes);
    }
    Tensor t = Tensor::empty(dtype, shape);
    in.seekg(offset);
    if (!in.read(static_cast<char*>(t.raw_data()), std::streamsize(t.nbytes()))) {
      fail("{}: external data file '{}' could not be read (offset {}, {} bytes)", where, file.string(), offset, nbytes);
    }
    return t;
  }

  std::string base_dir_;
  std::unordered_set<std::string> node_names_;
};

// Writes the types ONNX's shape inference found back into the proto's value_info. Inference is
// advisory (kernels compute exact shapes at run time; a model ONNX cannot infer, with custom domains
// or newer opsets, still loads), and libonnx's inference functions read past what their schemas
// check on hostile models (fuzz/graph_fuzzer.cpp found one crash after another), so it runs in a
// child process: a crash or a hang there costs the model its static types, never the process.
// The child sends back the model without its initializers' data (inference does not change them).
void infer_shapes(onnx::ModelProto& proto) {
  constexpr double kInferenceTimeLimitS = 60;
  IsolatedResult inferred = run_isolated(
      [&proto] {
        try {
          onnx::ShapeInferenceOptions options(false, 0, true);
          onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), options);
        } catch (const std::exception&) {
          // What it inferred before the failure stands.
        }
        proto.mutable_graph()->clear_initializer();
        proto.mutable_graph()->clear_sparse_initializer();
        return proto.SerializeAsString();
      },
      kInferenceTimeLimitS);
  onnx::ModelProto result;
  if (!inferred.bytes || !result.ParseFromString(*inferred.bytes)) {
    if (!inferred.started) {  // no child process here: say so once
      static std::once_flag said;
      std::call_once(said, [&] { fmt::print(stderr, "ingot: ONNX shape inference skipped: {}\n", inferred.why); });
    }
    return;
  }
  result.mutable_graph()->mutable_initializer()->Swap(proto.mutable_graph()->mutable_initializer());
  result.mutable_graph()->mutable_sparse_initializer()->Swap(proto.mutable_graph()->mutable_sparse_initializer());
  proto = std::move(result);
}

// ONNX's version converter, in a child process like shape inference (its adapters are as exposed to
// a hostile model), then shape inference on the result in the same child. The whole model comes
// back: adapters may add initializers. False, with `why`, when it throws, crashes or takes more than
// two minutes; where no child process can be made, it runs here as before.
bool convert_version(onnx::ModelProto& proto, int opset, bool inferable, std::string& why) {
  auto convert = [&proto, opset, inferable] {
    onnx::ModelProto converted = onnx::version_conversion::ConvertVersion(proto, opset);
    if (inferable) {
      try {
        onnx::ShapeInferenceOptions options(false, 0, true);
        onnx::shape_inference::InferShapes(converted, onnx::OpSchemaRegistry::Instance(), options);
      } catch (const std::exception&) {
        // What it inferred before the failure stands.
      }
    }
    return converted;
  };
  constexpr double kConversionTimeLimitS = 120;
  IsolatedResult result = run_isolated([&] { return convert().SerializeAsString(); }, kConversionTimeLimitS);
  if (!result.started) {
    try {
      proto = convert();
      return true;
    } catch (const std::exception& e) {
      why = e.what();
      return false;
    }
  }
  onnx::ModelProto converted;
  if (!result.bytes || !converted.ParseFromString(*result.bytes)) {
    why = result.bytes ? "the version converter's result did not parse" : "the version converter " + result.why;
    return false;
  }
  proto = std::move(converted);
  return true;
}

}  // namespace

std::shared_ptr<Model> import_onnx(const std::string& path) {
  std::string note;
  return import_onnx(path, 0, note);
}

std::shared_ptr<Model> import_onnx(const std::string& path, int opset, std::string& note) {
  std::string name = fs::path(path).filename().string();
  try {
    std::string bytes = read_file(path, "model file");
    onnx::ModelProto proto;
    if (bytes.empty()) fail("file is empty");
    if (!proto.ParseFromString(bytes))
      fail("not a valid ONNX model (protobuf parsing failed: truncated or corrupt file?)");
    if (!proto.has_graph() || proto.ir_version() <= 0) {
      fail("not a valid ONNX model (no graph or no IR version: truncated or not an ONNX file?)");
    }
    sort_nodes_topologically(proto);
    register_shape_rule_schemas();
    const bool inferable = checked_for_shape_inference(proto);
    if (inferable) infer_shapes(proto);
    int64_t have = 0;
    for (const auto& op : proto.opset_import()) {
      if (op.domain().empty() || op.domain() == "ai.onnx") have = std::max(have, int64_t(op.version()));
    }
    if (opset > 0 && have < opset) {
      std::string why;
      if (convert_version(proto, int(opset), inferable, why)) {
        note = "opset " + std::to_string(have) + " raised to " + std::to_string(opset) + " by ONNX's version converter";
      } else {
        if (auto nl = why.find('\n'); nl != std::string::npos) why.resize(nl);
        note = "opset " + std::to_string(have) + " could not be raised to " + std::to_string(opset) + ": " + why;
      }
    }
    auto model = std::make_shared<Model>();
    model->name = name;
    model->ir_version = proto.ir_version();
    model->producer = proto.producer_name() + (proto.producer_version().empty() ? "" : " " + proto.producer_version());
    for (const auto& op : proto.opset_import()) {  // a domain listed twice: its highest version
      int64_t& version = model->opsets[op.domain() == "ai.onnx" ? "" : op.domain()];
      version = std::max(version, int64_t(op.version()));
    }
    if (!model->opsets.count("")) model->opsets[""] = 1;  // IR < 3 files carry no opset import
    Importer importer(fs::path(path).parent_path().string());
    model->graph = importer.graph(proto.graph());
    verify(*model);
    return model;
  } catch (Error& e) {
    e.add_context("model '" + name + "'");
    throw;
  }
}

Value load_value_pb(const std::string& path, const ValueType& expected) {
  std::string bytes = read_file(path, "tensor file");
  Importer importer(fs::path(path).parent_path().string());
  try {
    auto read_sequence = [&](const onnx::SequenceProto& s) {
      std::vector<Tensor> items;
      for (const auto& t : s.tensor_values()) items.push_back(importer.tensor(t));
      return Value::make_sequence(std::move(items));
    };
    if (expected.kind == ValueKind::Sequence) {
      onnx::SequenceProto s;
      if (!s.ParseFromString(bytes)) fail("not a valid SequenceProto");
      return read_sequence(s);
    }
    if (expected.kind == ValueKind::Optional) {
      onnx::OptionalProto o;
      if (!o.ParseFromString(bytes)) fail("not a valid OptionalProto");
      if (o.has_tensor_value()) return Value(importer.tensor(o.tensor_value()));
      if (o.has_sequence_value()) return read_sequence(o.sequence_value());
      return Value();
    }
    onnx::TensorProto t;
    if (!t.ParseFromString(bytes)) fail("not a valid TensorProto");
    Tensor tensor = importer.tensor(t);
    // ONNX 1.12's test data stores bfloat16 tensors as UINT16 bit patterns; read them as declared.
    if (expected.dtype == DType::BFloat16 && tensor.dtype() == DType::UInt16) {
      Tensor relabelled = Tensor::empty(DType::BFloat16, tensor.shape());
      std::memcpy(relabelled.raw_data(), tensor.raw_data(), tensor.nbytes());
      tensor = relabelled;
    }
    return Value(tensor);
  } catch (Error& e) {
    e.add_context("'" + path + "'");
    throw;
  }
}

Tensor load_tensor_pb(const std::string& path) { return load_value_pb(path, ValueType{}).tensor; }

}  // namespace ingot
