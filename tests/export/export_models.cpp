// Exports one model per kind of nn module to ONNX, for the round trip through onnxruntime
// (tests/export/check_onnxruntime.js, ctest export.onnxruntime):
//
//   ingot-export-models DIR
//
// writes DIR/NAME.onnx and DIR/NAME.safetensors with the inputs ("in.0", ...) and Ingot's eager
// outputs in eval mode ("out.0", ...), at the batch size traced and, for models exported with a
// dynamic batch, DIR/NAME.b.safetensors at another batch size. The models: tests/export/cases.h.
#include <ingot/autograd.h>
#include <ingot/safetensors.h>

#include <cstdio>
#include <string>

#include "cases.h"

using namespace ingot;

namespace {

using namespace export_cases;

std::map<std::string, Tensor> run(Case& c, int64_t batch) {
  autograd::NoGradGuard no_grad;
  std::map<std::string, Tensor> io;
  std::vector<Tensor> in = c.inputs(batch);
  std::vector<Tensor> out = c.forward(in);
  for (size_t i = 0; i < in.size(); ++i) io["in." + std::to_string(i)] = in[i];
  for (size_t i = 0; i < out.size(); ++i) io["out." + std::to_string(i)] = out[i].to(Device::cpu());
  return io;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ingot-export-models DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  try {
    manual_seed(7);
    for (Case& c : cases()) {
      randomize_buffers(*c.module, 100);
      c.module->eval();
      nn::ExportOptions options;
      options.dynamic_batch = c.other_batch > 0;
      options.name = c.name;
      nn::export_onnx(*c.module, c.forward, c.inputs(c.batch), dir + "/" + c.name + ".onnx", options);
      save_safetensors(dir + "/" + c.name + ".safetensors", run(c, c.batch));
      if (c.other_batch) save_safetensors(dir + "/" + c.name + ".b.safetensors", run(c, c.other_batch));
      std::printf("%s: exported (%lld parameters%s)\n", c.name.c_str(), (long long)c.module->num_parameters(),
                  c.other_batch ? ", dynamic batch" : "");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ingot-export-models: %s\n", e.what());
    return 1;
  }
  return 0;
}
