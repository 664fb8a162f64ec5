// The CUDA backend's run-time libraries without a GPU: cuBLASLt is opened with dlopen on first use
// (core/dynamic_library.h), not linked, so every entry point the backend calls must
// resolve from the library the machine has, and a process that never multiplies on the GPU must not
// have loaded it. (The products themselves run on the GPU machine: tests/gpu.)
#ifdef INGOT_HAS_CUDA
#include <cublasLt.h>
#include <gtest/gtest.h>
#include <ingot/error.h>
#include <link.h>

#include <string>

#include "backends/cuda/cuda_runtime.h"
#include "core/dynamic_library.h"

namespace ingot {
namespace {

bool cublaslt_loaded() {
  bool found = false;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name && std::string(info->dlpi_name).find("libcublasLt") != std::string::npos)
          *static_cast<bool*>(data) = true;
        return 0;
      },
      &found);
  return found;
}

TEST(CudaLibraries, CublasLtLoadsOnFirstUseWithEveryEntryPoint) {
  // Nothing before this test asks for cuBLASLt (the unit tests run on the CPU backend).
  EXPECT_FALSE(cublaslt_loaded()) << "libcublasLt is loaded before any GPU matrix product";
  const cuda::CublasLt* api = nullptr;
  try {
    api = &cuda::lt();
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();  // a machine without cuBLASLt: the CPU backend does not need it
  }
  EXPECT_TRUE(cublaslt_loaded());
  for (const void* fn : {reinterpret_cast<const void*>(api->create), reinterpret_cast<const void*>(api->get_version),
                         reinterpret_cast<const void*>(api->matmul_desc_create),
                         reinterpret_cast<const void*>(api->matmul_desc_destroy),
                         reinterpret_cast<const void*>(api->matmul_desc_set_attribute),
                         reinterpret_cast<const void*>(api->matrix_layout_create),
                         reinterpret_cast<const void*>(api->matrix_layout_destroy),
                         reinterpret_cast<const void*>(api->matrix_layout_set_attribute),
                         reinterpret_cast<const void*>(api->matmul_preference_create),
                         reinterpret_cast<const void*>(api->matmul_preference_destroy),
                         reinterpret_cast<const void*>(api->matmul_preference_set_attribute),
                         reinterpret_cast<const void*>(api->matmul_algo_get_heuristic),
                         reinterpret_cast<const void*>(api->matmul_algo_check),
                         reinterpret_cast<const void*>(api->matmul)}) {
    EXPECT_NE(fn, nullptr);
  }
  // The library the machine has is the major version the backend was compiled against.
  EXPECT_EQ(api->get_version() / 10000, size_t(CUBLAS_VER_MAJOR));
  // Descriptors need no device: one made and destroyed through the loaded entry points.
  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(api->matrix_layout_create(&layout, CUDA_R_32F, 4, 3, 4), CUBLAS_STATUS_SUCCESS);
  const int32_t batch = 2;
  EXPECT_EQ(api->matrix_layout_set_attribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(api->matrix_layout_destroy(layout), CUBLAS_STATUS_SUCCESS);
}

TEST(CudaLibraries, AMissingLibraryOrEntryPointIsNamed) {
  DynamicLibrary none({"libingot-no-such-library.so.1"});
  EXPECT_NE(none.why_not().find("libingot-no-such-library.so.1 not found"), std::string::npos) << none.why_not();
  DynamicLibrary libc({"libc.so.6"});
  decltype(&cublasLtGetVersion) fn = nullptr;
  libc.get(fn, "cublasLtGetVersion");
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(libc.why_not(), "it has no cublasLtGetVersion");
}

}  // namespace
}  // namespace ingot
#endif
