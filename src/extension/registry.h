// Extension libraries inside Ingot: loading one (dlopen of a file, or of bytes a package carries),
// the C ABI table it is handed (include/ingot/extension_abi.h), and the registration of its ops into
// the op catalogue and kernel registry, which may grow while sessions exist. Each op's catalogue
// entry points to its ExtensionOp (OpDef::extension); its kernels on every backend are one
// trampoline that calls the library through the ABI; its gradient rule calls its gradient op; its
// shape rule calls the library's. The JIT builder (jit.cpp) produces libraries; packages embed them
// (package/package.cpp reads `libraries()` of the ops a model uses and loads them back).
#pragma once
#include <ingot/extension_abi.h>
#include <ingot/load_extension.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ingot {

struct ExtensionLibrary;

struct ExtensionOp {
  const ExtensionLibrary* library = nullptr;
  IngotKernelFn cpu = nullptr, cuda = nullptr;
  void* cpu_user = nullptr;
  void* cuda_user = nullptr;
  IngotShapeFn infer = nullptr;
  void* infer_user = nullptr;
  std::string gradient_op;  // "" when it has none
};

struct ExtensionLibrary {
  std::string name;    // "softshrink"
  std::string digest;  // XXH64 of the library's bytes, 16 hex digits
  std::string path;    // where it was loaded from ("" when from a package's bytes)
  std::vector<std::string> ops;  // "domain::Name"
  std::vector<uint8_t> bytes;    // the library itself (packages embed it)
  void* handle = nullptr;        // dlopen's; never closed (its code may run until exit)

  ExtensionInfo info() const;
};

namespace extension {

// Loads the library at `path` under `name` (its file name without lib and .so when empty) and
// registers its ops; a library with the same bytes already loaded is returned as it is. Throws
// ingot::Error naming the library: not found, not an extension, ABI version, a refused op.
const ExtensionLibrary& load_file(const std::string& path, const std::string& name = "");
// The same for a library's bytes (a package's copy): loaded from an anonymous in-memory file.
const ExtensionLibrary& load_bytes(const std::string& name, const std::vector<uint8_t>& bytes);
std::vector<const ExtensionLibrary*> libraries();

}  // namespace extension
}  // namespace ingot
