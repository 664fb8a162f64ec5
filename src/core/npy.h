// NumPy .npy files (format 1.0-3.0, little-endian, C order) <-> tensors.
#pragma once
#include <ingot/tensor.h>

#include <string>

namespace ingot {

Tensor load_npy(const std::string& path);
void save_npy(const std::string& path, const Tensor& tensor);

}  // namespace ingot
