// Checkpoints in the safetensors format (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header size, a JSON header {name: {"dtype", "shape", "data_offsets"}, "__metadata__":
// {string: string}}, then the tensors' bytes, row-major, little-endian. Files Ingot writes load with
// the Python safetensors package (and PyTorch through it), and the other way round.
//
//   save_safetensors("model.safetensors", net->state_dict(), {{"epoch", "3"}});
//   net->load_state_dict(load_safetensors("model.safetensors"));
#pragma once
#include <ingot/export.h>
#include <ingot/tensor.h>

#include <map>
#include <string>

INGOT_API_BEGIN
namespace ingot {

// Writes the tensors (copied from any device; bool, integer and float dtypes) and string metadata.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// Reads every tensor (on the CPU); `metadata`, when given, receives the header's __metadata__.
std::map<std::string, Tensor> load_safetensors(const std::string& path,
                                               std::map<std::string, std::string>* metadata = nullptr);

}  // namespace ingot
INGOT_API_END
