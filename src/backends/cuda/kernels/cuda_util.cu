#include "backends/cuda/kernels/cuda_util.cuh"

namespace ingot::cuda {

void make_indexers(const std::vector<const Shape*>& ins, const Shape& out, std::vector<Indexer*> result) {
  const size_t rank = out.size(), k = ins.size();
  // Per output dim (size-1 dims dropped): its size and, per input, the contiguous stride or 0.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides(k);
  std::vector<int64_t> running(k, 1);
  for (size_t d = rank; d-- > 0;) {
    std::vector<int64_t> s(k);
    for (size_t j = 0; j < k; ++j) {
      const Shape& in = *ins[j];
      size_t pad = rank - in.size();
      int64_t size = d >= pad ? in[d - pad] : 1;
      s[j] = size == 1 ? 0 : running[j];
      running[j] *= size;
    }
    if (out[d] == 1) continue;
    // Merge with the (inner) dim before when every input moves through both alike.
    bool merge = !dims.empty();
    for (size_t j = 0; j < k && merge; ++j) {
      int64_t inner = strides[j].back();
      merge = (inner == 0 && s[j] == 0) || (inner != 0 && s[j] == inner * dims.back());
    }
    if (merge) {
      dims.back() *= out[d];
    } else {
      dims.push_back(out[d]);
      for (size_t j = 0; j < k; ++j) strides[j].push_back(s[j]);
    }
  }
  if (dims.size() > size_t(kMaxRank)) fail("broadcast of rank {} exceeds the CUDA limit of {}", dims.size(), kMaxRank);
  // dims/strides were collected innermost first; Indexer wants outermost first.
  for (size_t j = 0; j < k; ++j) {
    Indexer& ix = *result[j];
    ix.rank = int(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) {
      ix.out_dims[d] = dims[dims.size() - 1 - d];
      ix.strides[d] = strides[j][dims.size() - 1 - d];
    }
  }
}

Indexer make_indexer(const Shape& in, const Shape& out) {
  Indexer ix;
  make_indexers({&in}, out, {&ix});
  return ix;
}

}  // namespace ingot::cuda
