// The .ingot package: the optimized graph, its weights laid out for mmap, and the metadata that
// says what it was built for (docs/PACKAGE_FORMAT.md). Saving happens once, in `ingot convert`;
// loading validates and maps the file and builds the Model around the mapped weights: it copies no
// weight, runs no pass and compiles nothing.
#pragma once
#include <ingot/session.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace ingot {

inline constexpr uint32_t kPackageFormatVersion = 1;
inline constexpr char kPackageMagic[8] = {'I', 'N', 'G', 'O', 'T', 'P', 'K', 'G'};
inline constexpr size_t kPackageHeaderSize = 64;
inline constexpr size_t kPackageAlignment = 64;  // of the data section and of every weight in it

// Opaque bytes under a key (precompiled device code, chosen algorithms).
struct PackageBlob {
  std::string key;
  std::vector<uint8_t> data;
};

// An extension library embedded in the package (the ops of the model it defines).
struct PackageExtension {
  std::string name, digest;
  std::vector<std::string> ops;
  size_t nbytes = 0;
};

struct PackageMetadata {
  uint32_t format_version = kPackageFormatVersion;
  std::string producer;   // "ingot 0.1.0"; save_package fills it when empty
  std::string device = "cpu";  // "cpu" | "cuda"
  std::string arch;       // "x86_64-avx2", "sm_90"; save_package fills the current one when empty
  std::string precision = "fp32";
  std::vector<ValueInfo> inputs, outputs;  // the signature; taken from the graph when empty
  std::string source_model;
  int64_t created_unix = 0;  // 0: now
  std::vector<PackageBlob> device_code, algorithms;
  // Read back from a package; save_package embeds the libraries of the model's extension ops itself.
  std::vector<PackageExtension> extensions;
};

// The arch string of `device` on this machine and build: "x86_64-avx2" for the CPU, "sm_90" for a
// CUDA device ("" when there is none).
std::string current_arch(Device device);
std::string_view precision_name(Precision precision);

// Writes `model` (after whatever passes the caller ran) to `path`. Throws ingot::Error.
void save_package(const Model& model, const PackageMetadata& metadata, const std::string& path);

// Maps and validates a package (magic, header, format version, FlatBuffers verification, checksum,
// device and arch) and returns its Model, whose weights wrap the mapped file. Throws ingot::Error
// with a message naming the file.
std::shared_ptr<Model> load_package(const std::string& path, Device device);
// Session::load's entry: the same, and a reduced SessionOptions::precision must be the package's
// (a package's precision is fixed at conversion; FP32, the default, accepts any package).
std::shared_ptr<Model> load_package(const std::string& path, const SessionOptions& options);
// The metadata only (validated the same way, without the device check).
PackageMetadata read_package_metadata(const std::string& path);
// The model and metadata without the device check (for `ingot inspect`, whatever the target).
std::shared_ptr<Model> inspect_package(const std::string& path, PackageMetadata& metadata);

// Whether `path` names a package: it ends in .ingot or starts with the magic.
bool is_package_file(const std::string& path);

// 64-bit hash of the package body: XXH64 (Debian's libxxhash), the same digest packages always had.
uint64_t package_hash(const void* data, size_t nbytes, uint64_t seed = 0);
// Sets the header's checksum to that of the bytes after it (false when there is no whole header):
// for the package fuzzer, whose mutations would otherwise stop at the checksum.
bool fix_package_checksum(std::vector<uint8_t>& bytes);

// The load-time pipeline of Session::load run ahead of time, for `ingot convert`: import, lowering,
// the optimization passes, reduced precision. `input_shapes` fixes dims of graph inputs (symbolic
// ones; a static one must agree); every use of a fixed symbol in the graph follows.
struct ConvertOptions {
  Device device = Device::cpu();
  Precision precision = Precision::FP32;
  bool optimize = true;
  std::vector<std::pair<std::string, std::vector<int64_t>>> input_shapes;
  // Called when a step starts ("import", "passes", "precision") and ends (done = true).
  std::function<void(const std::string& step, bool done)> progress;
};
std::shared_ptr<Model> convert_model(const std::string& onnx_path, const ConvertOptions& options);
// The same from the lowering on, for a model already in memory (traced by nn::export_package).
std::shared_ptr<Model> convert_model(std::shared_ptr<Model> model, const ConvertOptions& options);

}  // namespace ingot
