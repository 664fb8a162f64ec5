// A shared library opened with dlopen when first needed, its entry points looked up by name. The
// CUDA backend opens NVRTC (compilers are optional at run time), cuBLASLt (linked, its static
// initializers cost 70-90 ms at every process start, CPU-only runs included) and NCCL this way, the
// CPU backend its Gloo plugin.
#pragma once
#include <dlfcn.h>
#include <fmt/format.h>

#include <initializer_list>
#include <string>
#include <type_traits>

namespace ingot {

class DynamicLibrary {
 public:
  // Opens the first of `names` that loads (RTLD_NOW | RTLD_LOCAL: nothing it defines is visible to
  // other libraries); why_not() says why none did.
  explicit DynamicLibrary(std::initializer_list<const char*> names) {
    for (const char* name : names) {
      if ((handle_ = dlopen(name, RTLD_NOW | RTLD_LOCAL))) return;
      if (why_not_.empty()) why_not_ = fmt::format("{} not found ({})", name, dlerror());
    }
  }
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  // Sets `fn` to the entry point `symbol` (typed as fn is); a missing one is recorded in why_not().
  template <class F>
  void get(F*& fn, const char* symbol) {
    static_assert(std::is_function_v<F>);
    fn = handle_ ? reinterpret_cast<F*>(dlsym(handle_, symbol)) : nullptr;
    if (!fn && handle_ && missing_.empty()) missing_ = fmt::format("it has no {}", symbol);
  }

  // Empty when the library opened and every entry point asked for was found.
  std::string why_not() const { return handle_ ? missing_ : why_not_; }

 private:
  void* handle_ = nullptr;  // never closed: entry points stay valid for the process
  std::string why_not_, missing_;
};

}  // namespace ingot
