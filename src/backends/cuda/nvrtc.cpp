#include "backends/cuda/nvrtc.h"

#include <fmt/format.h>
#include <ingot/error.h>
#include <nvrtc.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/dynamic_library.h"
#include "core/flags.h"

namespace ingot::cuda::nvrtc {
namespace {

// The few entry points used, resolved from the shared library.
struct Api {
  decltype(&nvrtcVersion) version = nullptr;
  decltype(&nvrtcGetErrorString) error_string = nullptr;
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  std::string why_not;  // empty when loaded
};

const Api& api() {
  static const Api a = [] {
    Api r;
    if (flags::enabled("INGOT_NO_NVRTC")) {
      r.why_not = "INGOT_NO_NVRTC is set";
      return r;
    }
    // Any NVRTC from 12 on makes cubins the driver loads (the generated code includes no headers).
    static DynamicLibrary lib({"libnvrtc.so.13", "libnvrtc.so", "libnvrtc.so.12"});
    lib.get(r.version, "nvrtcVersion");
    lib.get(r.error_string, "nvrtcGetErrorString");
    lib.get(r.create, "nvrtcCreateProgram");
    lib.get(r.destroy, "nvrtcDestroyProgram");
    lib.get(r.compile, "nvrtcCompileProgram");
    lib.get(r.log_size, "nvrtcGetProgramLogSize");
    lib.get(r.log, "nvrtcGetProgramLog");
    lib.get(r.cubin_size, "nvrtcGetCUBINSize");
    lib.get(r.cubin, "nvrtcGetCUBIN");
    r.why_not = lib.why_not();
    return r;
  }();
  return a;
}

const Api& require() {
  const Api& a = api();
  if (!a.why_not.empty()) fail("NVRTC is not available: {}", a.why_not);
  return a;
}

}  // namespace

bool available(std::string* why) {
  const Api& a = api();
  if (why) *why = a.why_not;
  return a.why_not.empty();
}

std::string version() {
  const Api& a = require();
  int major = 0, minor = 0;
  a.version(&major, &minor);
  return fmt::format("nvrtc{}.{}", major, minor);
}

std::string compile_cubin(const std::string& source, const std::string& name, const std::string& arch) {
  const Api& a = require();
  auto check = [&](nvrtcResult r, const char* what) {
    if (r != NVRTC_SUCCESS) fail("NVRTC {} of {}: {}", what, name, a.error_string(r));
  };
  nvrtcProgram prog = nullptr;
  check(a.create(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr), "create");
  struct Guard {
    const Api& a;
    nvrtcProgram* p;
    ~Guard() { a.destroy(p); }
  } guard{a, &prog};
  const std::string arch_opt = "--gpu-architecture=" + arch;
  const char* options[] = {arch_opt.c_str(), "--std=c++17"};
  const nvrtcResult compiled = a.compile(prog, 2, options);
  if (compiled != NVRTC_SUCCESS) {
    size_t size = 0;
    a.log_size(prog, &size);
    std::string log(size, '\0');
    if (size) a.log(prog, log.data());
    fail("NVRTC could not compile {} for {}: {}\n{}", name, arch, a.error_string(compiled), log);
  }
  size_t size = 0;
  check(a.cubin_size(prog, &size), "cubin size");
  std::string cubin(size, '\0');
  check(a.cubin(prog, cubin.data()), "cubin");
  return cubin;
}

}  // namespace ingot::cuda::nvrtc
