// Loading user ops: an extension's sources compiled just in time, or a library built beforehand.
// The ops it defines join Ingot's catalogue while sessions exist and are then usable eagerly
// (ops::call with their domain), in graphs and ONNX models that use their domain, under autograd
// when they name a gradient op, and in packages (`ingot convert` embeds the library).
// docs/CUSTOM_OPS.md; the authoring side is <ingot/extension.h>.
#pragma once
#include <ingot/export.h>

#include <functional>
#include <string>
#include <vector>

INGOT_API_BEGIN
namespace ingot {

struct ExtensionOptions {
  std::vector<std::string> extra_cflags;       // for C++ sources (the system compiler, $CXX or c++)
  std::vector<std::string> extra_cuda_cflags;  // for .cu sources (nvcc)
  std::vector<std::string> extra_ldflags;
  std::vector<std::string> extra_include_paths;
  // Where builds are cached: "" for $INGOT_EXTENSIONS_DIR, else $XDG_CACHE_HOME/ingot/extensions,
  // else ~/.cache/ingot/extensions. It must belong to the user and not be group- or world-writable
  // (a writable cache would let others replace the code this process runs).
  std::string build_directory;
  // Compile jobs at once: 0 for $INGOT_EXTENSION_JOBS, else $MAX_JOBS, else min(cores, 4).
  int jobs = 0;
  // The GPU architecture for .cu sources ("sm_90"): "" for $INGOT_EXTENSION_CUDA_ARCH, else the
  // first CUDA device's, else sm_90. The library carries that architecture's code and its PTX.
  std::string cuda_arch;
  // Progress and compiler command lines (`verbose` prints them on stderr when no callback is set).
  bool verbose = false;
  std::function<void(const std::string& line)> log;
};

struct ExtensionInfo {
  std::string name;
  std::string library;             // the shared library loaded
  std::string digest;              // XXH64 of the library's bytes (16 hex digits)
  std::vector<std::string> ops;    // "domain::Name" of each op it defined
  bool compiled = false;           // built by this call (false: cached, or already loaded)
  double seconds = 0;              // this call's wall time
};

// Builds (or finds in the cache) and loads the extension `name` from `sources` (.cpp/.cc/.cxx/.c
// for the system compiler, .cu for nvcc). The cache key hashes the sources, the headers beside them,
// the flags, the compilers and Ingot's version, so an unchanged extension loads without compiling
// and a changed one is rebuilt. Builds of one name are serialized across processes by a lock that a
// killed build cannot leave held. A compile error is raised with the compiler's own message.
// Loading the same build again returns the loaded one; another build of an extension whose ops are
// already defined in this process is refused (restart the process to load it).
ExtensionInfo load_extension(const std::string& name, const std::vector<std::string>& sources,
                             const ExtensionOptions& options = {});

// Loads an extension library built beforehand (the same library load_extension produces).
ExtensionInfo load_extension_library(const std::string& path);

// Every extension loaded in this process.
std::vector<ExtensionInfo> loaded_extensions();

}  // namespace ingot
INGOT_API_END
