// Helpers shared by the unit tests: a private scratch folder and builders for small ONNX models.
#pragma once
#include <ingot/dtype.h>
#include <ingot/error.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace ingot::testing {

// The message of the ingot::Error f throws, or "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ingot::Error& e) {
    return e.what();
  }
  return "";
}

// A scratch folder private to this test process: ctest runs every test case as its own process,
// in parallel, so fixed file names in a shared folder would race.
inline std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("ingot_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// A tensor value declaration; a dim is a number ("3") or a symbol ("N").
inline onnx::ValueInfoProto tensor_info(const std::string& name, int elem, const std::vector<std::string>& dims) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  auto* shape = t->mutable_shape();
  for (const auto& d : dims) {
    auto* dim = shape->add_dim();
    if (std::isdigit(static_cast<unsigned char>(d[0])))
      dim->set_dim_value(std::stoll(d));
    else
      dim->set_dim_param(d);
  }
  return v;
}

// The same with static dims only.
inline onnx::ValueInfoProto static_tensor_info(const std::string& name, int elem, const std::vector<int64_t>& dims) {
  std::vector<std::string> text;
  for (int64_t d : dims) text.push_back(std::to_string(d));
  return tensor_info(name, elem, text);
}

// A node; its name defaults to "<op>_<first output>".
inline onnx::NodeProto make_node(const std::string& op, const std::vector<std::string>& in,
                                 const std::vector<std::string>& out, const std::string& name = "") {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name.empty() ? op + "_" + out.at(0) : name);
  for (const auto& i : in) n.add_input(i);
  for (const auto& o : out) n.add_output(o);
  return n;
}

// If(cond) with the two branch graphs as its then_branch/else_branch attributes.
inline onnx::NodeProto make_if(const std::string& cond, const std::vector<std::string>& out, onnx::GraphProto then_g,
                               onnx::GraphProto else_g, const std::string& node_name = "") {
  onnx::NodeProto n = make_node("If", {cond}, out, node_name);
  for (auto [name, body] : {std::pair{"then_branch", &then_g}, std::pair{"else_branch", &else_g}}) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = std::move(*body);
  }
  return n;
}

inline onnx::ModelProto model_with(onnx::GraphProto graph, int opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("ingot-tests");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  *m.mutable_graph() = std::move(graph);
  return m;
}

// A one-element float32 or float16 initializer: rank 0, or `dims` (all ones) when given.
inline void add_scalar(onnx::GraphProto& g, const std::string& name, float v, int elem = onnx::TensorProto::FLOAT,
                       const std::vector<int64_t>& dims = {}) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(elem);
  for (int64_t d : dims) t->add_dims(d);
  if (elem == onnx::TensorProto::FLOAT16) {
    t->add_int32_data(ingot::float_to_half(v));  // ONNX keeps float16 bit patterns in int32_data
  } else {
    t->add_float_data(v);
  }
}

// A float initializer of uniform random values in [lo, hi).
inline void add_random_initializer(onnx::GraphProto& g, const std::string& name, const std::vector<int64_t>& dims,
                                   std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < n; ++i) t->add_float_data(dist(rng));
}

// A 1-D int64 initializer.
inline void add_int64_initializer(onnx::GraphProto& g, const std::string& name, const std::vector<int64_t>& values) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(int64_t(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
}

// Writes the model into temp_dir() and returns its path.
inline std::string save_model(const onnx::ModelProto& m, const std::string& file) {
  std::string path = (temp_dir() / file).string();
  std::ofstream out(path, std::ios::binary);
  m.SerializeToOstream(&out);
  return path;
}

}  // namespace ingot::testing
