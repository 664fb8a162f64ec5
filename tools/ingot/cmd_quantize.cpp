// `ingot quantize MODEL.onnx -o MODEL.qdq.onnx --calib ...`: post-training int8 quantization into a
// standard QDQ ONNX model (include/ingot/quantize.h, docs/QUANTIZATION.md).
#include <ingot/quantize.h>

#include <iostream>

#include "commands.h"
#include "inputs.h"
#include "quantize_options.h"

namespace ingot::cli {

Runner add_quantize_command(CLI::App& app) {
  struct Options {
    std::string model, output;
    std::vector<std::string> input_shapes;
    QuantizeCliOptions q;
    bool quiet = false;
  };
  auto o = std::make_shared<Options>();
  app.add_option("MODEL", o->model, "Float ONNX model (.onnx)")->required();
  app.add_option("--output,-o", o->output, "QDQ model to write (.onnx)")->required();
  add_quantize_options(app, o->q);
  app.add_option("--input-shape", o->input_shapes, "NAME=DIMS: fix an input's symbolic dims, e.g. x=1,3,224,224")
      ->allow_extra_args(false);
  app.add_flag("--quiet,-q", o->quiet, "No progress display");
  return [o] {
    QuantizeSettings settings = quantize_settings(o->q, o->quiet);
    for (const auto& spec : o->input_shapes) settings.input_shapes.push_back(parse_input_shape(spec));
    const QuantizeReport r = quantize(o->model, o->output, settings);
    std::cout << "wrote " << o->output << "\n";
    write_report(o->q, r);
    return 0;
  };
}

}  // namespace ingot::cli
