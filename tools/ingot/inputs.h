// Reading tensors given on the command line: NAME=FILE or FILE (positional), .npy or .pb.
#pragma once
#include <ingot/tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace ingot::cli {

Tensor load_tensor_file(const std::string& path);

// Resolves "--input" arguments against the model's input names: "NAME=FILE" binds by name (when NAME
// is an input), anything else binds to the next input in graph-input order.
std::vector<std::pair<std::string, Tensor>> load_inputs(const std::vector<std::string>& args,
                                                        const std::vector<std::string>& input_names);

}  // namespace ingot::cli
