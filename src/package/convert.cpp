// `ingot convert`: what Session::load does to an ONNX model before building the executor (the one
// compile pipeline, compiler/compile.h), done once ahead of time, with input shapes fixed first.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

#include "compiler/compile.h"
#include "core/strings.h"
#include "onnx/onnx_import.h"
#include "package/package.h"

namespace ingot {

namespace {

// Fixes dims of graph inputs; a symbol fixed on an input is fixed wherever the graph uses it.
void fix_input_shapes(Model& model, const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes) {
  Graph& g = *model.graph;
  std::map<std::string, int64_t> symbols;
  for (const auto& [name, dims] : shapes) {
    auto it = std::find_if(g.inputs.begin(), g.inputs.end(), [&](const ValueInfo& vi) { return vi.name == name; });
    if (it == g.inputs.end()) {
      std::string names = join(g.inputs, ", ", [](const ValueInfo& vi) { return vi.name; });
      fail("--input-shape {}: the model has no input named '{}' (inputs: {})", name, name, names);
    }
    std::string given = shape_str(dims);
    if (it->type.shape && it->type.shape->size() != dims.size())
      fail("--input-shape {}={}: input '{}' has rank {} ({})", name, given, name, it->type.shape->size(),
           it->type.str());
    if (!it->type.shape) it->type.shape.emplace(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) {
      Dim& dim = (*it->type.shape)[d];
      if (dims[d] < 0) fail("--input-shape {}={}: negative dimension", name, given);
      if (dim.is_static() && dim.value != dims[d])
        fail("--input-shape {}={}: dimension {} of input '{}' is fixed at {}", name, given, d, name, dim.value);
      if (!dim.is_static() && !dim.symbol.empty()) {
        auto [s, inserted] = symbols.emplace(dim.symbol, dims[d]);
        if (!inserted && s->second != dims[d])
          fail("--input-shape {}={}: '{}' is already set to {}", name, given, dim.symbol, s->second);
      }
      dim = Dim{dims[d], ""};
    }
  }
  if (symbols.empty()) return;
  auto fix = [&](ValueInfo& vi) {
    if (!vi.type.shape) return;
    for (Dim& d : *vi.type.shape)
      if (auto s = symbols.find(d.symbol); !d.is_static() && s != symbols.end()) d = Dim{s->second, ""};
  };
  std::function<void(Graph&)> walk = [&](Graph& graph) {
    for (auto& vi : graph.inputs) fix(vi);
    for (auto& vi : graph.outputs) fix(vi);
    for (auto& [name, vi] : graph.value_info) fix(vi);
    for (Node& n : graph.nodes)
      for (auto& [name, a] : n.attrs) {
        if (a.g) walk(*a.g);
        for (auto& sub : a.graphs) walk(*sub);
      }
  };
  walk(g);
}

}  // namespace

std::shared_ptr<Model> convert_model(const std::string& onnx_path, const ConvertOptions& options) {
  if (options.progress) options.progress("import", false);
  std::shared_ptr<Model> model = import_onnx(onnx_path);
  if (options.progress) options.progress("import", true);
  return convert_model(std::move(model), options);
}

std::shared_ptr<Model> convert_model(std::shared_ptr<Model> model, const ConvertOptions& options) {
  auto step = [&](const char* name, bool done) {
    if (options.progress) options.progress(name, done);
  };
  try {
    fix_input_shapes(*model, options.input_shapes);
  } catch (Error& e) {
    e.add_context("model '" + model->name + "'");
    throw;
  }
  // Progress in two parts: the lowerings and passes, then the precision and layout steps.
  step("passes", false);
  bool in_passes = true;
  auto finish_passes = [&] {
    if (!in_passes) return;
    in_passes = false;
    step("passes", true);
    step("precision", false);
  };
  compile(*model, {options.optimize, compute_dtype(options.precision), options.device.type},
          [&](const CompileStep& s, bool, const Model&) {
            if (s.stage == "precision" || s.stage == "layout") finish_passes();
            return true;
          });
  finish_passes();
  step("precision", true);
  return model;
}

}  // namespace ingot
