// Reading tensors given on the command line: NAME=FILE or FILE (positional), .npy or .pb.
#pragma once
#include <ingot/session.h>
#include <ingot/tensor.h>

#include <random>

#include <string>
#include <utility>
#include <vector>

namespace ingot::cli {

Tensor load_tensor_file(const std::string& path);

// Whether a dim of TensorInfo::dims is a number rather than a symbol.
bool is_static_dim(const std::string& dim);

// A random input for `info`: shape `fixed` when given (--input-shape), else a symbolic first dim is
// `batch` and any other one 1. Floats are uniform in [-1, 1); integers and bools are 0 (safe as
// indices and sizes).
Tensor random_input(const TensorInfo& info, int64_t batch, const std::vector<int64_t>* fixed, std::mt19937& rng);

// "--input-shape x=1,3,224,224" -> {"x", {1,3,224,224}}; a malformed spec is an error naming it.
std::pair<std::string, std::vector<int64_t>> parse_input_shape(const std::string& spec);

// Resolves "--input" arguments against the model's input names: "NAME=FILE" binds by name (when NAME
// is an input), anything else binds to the next input in graph-input order.
std::vector<std::pair<std::string, Tensor>> load_inputs(const std::vector<std::string>& args,
                                                        const std::vector<std::string>& input_names);

// The feeds of `ingot bench` and `ingot profile`: inputs given with --input ("NAME=FILE" or FILE),
// the others random (random_input, seeded) with the shapes given with --input-shape, else a symbolic
// first dim of `batch`. `symbolic_ok` false: an input with a symbolic dim and no --input-shape is an
// error naming it (a profile of made-up shapes would mislead). `random` says whether any was made up.
struct Feeds {
  std::vector<std::pair<std::string, Tensor>> feeds;
  bool random = false;
};
Feeds make_feeds(const Session& session, const std::vector<std::string>& inputs,
                 const std::vector<std::string>& input_shapes, int64_t batch, uint32_t seed, bool symbolic_ok);

}  // namespace ingot::cli
